"""The SQL of the hybrid memory search, in the pieces `search_selectors` puts together into its
two statements: the words' (the message's word forms, the window of recent rows, the rare words'
rows, the text scores), which needs no vector, and the scores' (the nearest vectors, exact or
HNSW, with the words' candidates and their neighbours)."""

# Candidates come from three places: an exact vector scan (small owners) or the HNSW index (big
# ones), and a full-text match. The text score is an IDF-weighted count of the query's words
# (BM25 without term frequency, which one-line memories hardly have); vector and text scores are
# min-max normalised over the candidates before they are weighted, so neither scale dominates.
# A memory then also scores for the best of its neighbours — memories made within the runtime
# config's neighbour_seconds of it —, because what answers a question is often said next to its
# keywords; the owner's neighbours of every candidate are candidates too, since such an answer
# ("LeBron, no doubt") may share neither words nor meaning with the question. A memory made in
# a period the query names gains DATE_MATCH_WEIGHT.
#
# Each word of the message is stemmed in every one of models.STEMMED_LANGUAGES, as the memories'
# words are ("studies" → "studi", "stud", "studies"): two or three forms a word. (The made-up
# suffix forms before, ~45 for three words, were first looked up one by one in
# memnode_owner_lexemes to drop those no memory had; for three stems' ~5 forms those lookups cost
# more than they saved: 23.0 → 15.7 ms median for common words, bench/README.md.)
# What the match ranks is bounded whatever the words (issue #29): every row of a rare word, and
# of a common one only those in the window of the most recent rows (WINDOW_SQL); a common word's
# document frequency is then estimated from its share of the window. Equal text scores rank the
# more recent first, as the window does. A memory past its valid_until is never returned.
#
# The constants the comments name are search_selectors' (the `%(...)s` parameters carry them).

# The owner's and the global current rows, as the database counts them (CurrentMemoryCount),
# capped where the search stops telling counts apart.
VISIBLE_ROWS_SQL = """
SELECT LEAST(GREATEST(COALESCE(sum(rows), 0), 0), %(visible_max)s)::int
  FROM memory_currentmemorycount WHERE owner_key IN (%(owner)s::int, %(global_key)s)
"""
# The owner's and the global rows each in their own scan of memnode_owner_vectors, which holds
# every current row's half-precision vector next to its owner: one owner's rows are read
# together, without the table, where the table has them on pages all over it. Half precision
# orders them as the full vectors do but for near-ties, which the candidates' margin (4 × the
# limit) absorbs; the scores read the same copy. Above HALF_VECTOR_MAX_DIM dimensions the scan
# reads the table's vectors.
EXACT_NEAREST = """
nearest AS MATERIALIZED (
    SELECT id FROM (
        (SELECT id, {column} <=> %(vector)s::{column_type} AS distance FROM memory_memorynode
          WHERE owner_id = %(owner)s::int AND valid_to IS NULL AND {column} IS NOT NULL {{kinds}}
          ORDER BY distance LIMIT %(candidates)s)
        UNION ALL
        (SELECT id, {column} <=> %(vector)s::{column_type} AS distance FROM memory_memorynode
          WHERE owner_id IS NULL AND valid_to IS NULL AND {column} IS NOT NULL {{kinds}}
          ORDER BY distance LIMIT %(candidates)s)
    ) AS closest
     ORDER BY distance
     LIMIT %(candidates)s
),
"""
# The owner filter is spelled so that no B-tree can serve it, which leaves the planner the HNSW
# index; the over-fetched candidates are re-ranked by exact distance.
APPROXIMATE_NEAREST = """
approximate AS MATERIALIZED (
    SELECT id FROM memory_memorynode
     WHERE COALESCE(owner_id, %(owner)s::int) = %(owner)s::int AND valid_to IS NULL {kinds}
     ORDER BY embedding <=> %(vector)s::vector
     LIMIT %(overfetch)s
),
nearest AS MATERIALIZED (
    SELECT id FROM approximate
     ORDER BY (SELECT embedding <=> %(vector)s::vector FROM memory_memorynode AS n
                WHERE n.id = approximate.id)
     LIMIT %(candidates)s
),
"""
NO_NEAREST = """
nearest AS (SELECT NULL::bigint AS id WHERE false),
"""
# The window: the owner's TEXT_WINDOW_ROWS most recent current memories (and as many global
# ones), read newest first from memnode_owner_recent_words (short ones, without the table) and
# memnode_owner_recent_long, and tested against the words. It bounds what a common word costs:
# matching, counting and ranking half of a 10k-row owner's memories took the full text to 14 ms
# (bench/README.md). An owner whose words are not looked up has a window of FORM_LOOKUP_MIN_ROWS,
# which holds all of their rows: matched whole, as before.
WINDOW_SQL = """
recent AS MATERIALIZED (
    (SELECT id, kind, tsv, created_at FROM (
        (SELECT id, kind, tsv, created_at FROM memory_memorynode
          WHERE owner_id = %(owner)s::int AND valid_to IS NULL
            AND octet_length(topic) + octet_length(description) <= {short_text}
          ORDER BY created_at DESC LIMIT %(window)s)
        UNION ALL
        (SELECT id, kind, tsv, created_at FROM memory_memorynode
          WHERE owner_id = %(owner)s::int AND valid_to IS NULL
            AND NOT octet_length(topic) + octet_length(description) <= {short_text}
          ORDER BY created_at DESC LIMIT %(window)s)
     ) AS own ORDER BY created_at DESC LIMIT %(window)s)
    UNION ALL
    (SELECT id, kind, tsv, created_at FROM (
        (SELECT id, kind, tsv, created_at FROM memory_memorynode
          WHERE owner_id IS NULL AND valid_to IS NULL
            AND octet_length(topic) + octet_length(description) <= {short_text}
          ORDER BY created_at DESC LIMIT %(window)s)
        UNION ALL
        (SELECT id, kind, tsv, created_at FROM memory_memorynode
          WHERE owner_id IS NULL AND valid_to IS NULL
            AND NOT octet_length(topic) + octet_length(description) <= {short_text}
          ORDER BY created_at DESC LIMIT %(window)s)
     ) AS global ORDER BY created_at DESC LIMIT %(window)s)
),
window_size AS MATERIALIZED (SELECT GREATEST(count(*), 1) AS rows FROM recent),
window_hits AS MATERIALIZED (
    SELECT recent.id, recent.kind, recent.created_at, asked.term
      FROM recent JOIN asked ON recent.tsv @@ asked.query
     WHERE recent.tsv @@ (SELECT query FROM any_asked)
),
"""
# For an owner whose forms are looked up (FORM_LOOKUP_MIN_ROWS), the rows of each word the window
# finds rare (in at most WORD_LOOKUP_MAX_ROWS rows by its share of the window) are read from
# memnode_owner_lexemes, up to one more than that: a word with no more is rare, and all its rows
# are candidates; one with more is common, and only the window finds its rows. When the message
# has several words and one is common, the rows with every word are read there too (up to
# WORD_LOOKUP_MAX_ROWS): where all are common, the window holds only its share of the rows that
# score highest (a fifth of them at 10k rows), and the index finds them all at once.
WORDS_LOOKED_UP = """
term_keys AS MATERIALIZED (
    SELECT term, array_agg(prefix || '~' || form) AS keys
      FROM stemmed CROSS JOIN (VALUES (%(owner)s::int::text), ('g')) AS owners(prefix)
     GROUP BY term
),
looked_up AS MATERIALIZED (
    SELECT term_keys.term, found.id, found.kind, found.created_at
      FROM term_keys
     CROSS JOIN LATERAL (
         SELECT id, kind, created_at FROM memory_memorynode
          WHERE memory_owner_lexemes(owner_id, tsv) && term_keys.keys AND valid_to IS NULL
          LIMIT %(word_lookup_max)s + 1
     ) AS found
     WHERE (SELECT count(*) FROM window_hits WHERE window_hits.term = term_keys.term)
           * %(visible)s <= %(word_lookup_max)s * (SELECT rows FROM window_size)
),
counted AS MATERIALIZED (
    SELECT term, count(*) AS found FROM looked_up GROUP BY term
),
all_words AS MATERIALIZED (
    SELECT id, kind, created_at FROM memory_memorynode
     WHERE {all_words} AND valid_to IS NULL
       AND EXISTS (SELECT FROM asked
                    WHERE term NOT IN (SELECT term FROM counted
                                        WHERE found <= %(word_lookup_max)s))
     LIMIT %(word_lookup_max)s
),
beyond_window AS MATERIALIZED (
    SELECT DISTINCT ON (id) id, kind, created_at FROM (
        SELECT id, kind, created_at FROM looked_up
         WHERE term IN (SELECT term FROM counted WHERE found <= %(word_lookup_max)s)
        UNION ALL
        SELECT id, kind, created_at FROM all_words
    ) AS found
     WHERE id NOT IN (SELECT id FROM recent)
),
beyond_hits AS MATERIALIZED (
    SELECT beyond_window.id, beyond_window.kind, beyond_window.created_at, asked.term
      FROM beyond_window
      JOIN memory_memorynode AS n USING (id)
      JOIN asked ON n.tsv @@ asked.query
),
"""
ALL_WORDS = """memory_owner_lexemes(owner_id, tsv)
                && (SELECT keys FROM term_keys WHERE term = (%(words)s::text[])[{number}])"""
WORDS_NOT_LOOKED_UP = """
counted AS (SELECT NULL::text AS term, NULL::bigint AS found WHERE false),
beyond_hits AS (
    SELECT NULL::bigint AS id, NULL::varchar AS kind, NULL::timestamptz AS created_at,
           NULL::text AS term
     WHERE false
),
"""
SEARCH_FORMS_SQL = """
stemmed AS MATERIALIZED (
    SELECT DISTINCT word AS term, form
      FROM unnest(%(variant_words)s::text[], %(variants)s::text[]) AS said(word, variant)
     CROSS JOIN unnest(%(languages)s::regconfig[]) AS language
     CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector(language, variant))) AS form
),
asked AS MATERIALIZED (
    SELECT term, string_agg(quote_literal(form), ' | ')::tsquery AS query
      FROM stemmed GROUP BY term
),
any_asked AS MATERIALIZED (
    SELECT string_agg(quote_literal(form), ' | ')::tsquery AS query FROM stemmed
),
"""
# The words' half of a search, which needs no vector (search_selectors.memory_text_match): the
# candidates the words find, with their text scores, best first.
TEXT_MATCH_SQL = """
hits AS MATERIALIZED (
    SELECT id, kind, created_at, term, true AS in_window FROM window_hits
    UNION ALL
    SELECT id, kind, created_at, term, false FROM beyond_hits
),
terms AS MATERIALIZED (
    SELECT term, idf,
           idf >= %(min_idf)s OR NOT bool_or(idf >= %(min_idf)s) OVER () AS selective
      FROM (SELECT term, ln(1 + (GREATEST(rows, df) - df + 0.5) / (df + 0.5)) AS idf
              FROM (SELECT hits.term,
                           CASE WHEN min(counted.found) <= %(word_lookup_max)s
                                THEN min(counted.found)
                                ELSE GREATEST(count(*) FILTER (WHERE in_window) * %(visible)s
                                              / (SELECT rows FROM window_size)::float,
                                              count(*), min(counted.found))
                           END AS df
                      FROM hits LEFT JOIN counted USING (term)
                     GROUP BY hits.term) AS frequencies
             CROSS JOIN (SELECT %(visible)s::int AS rows) AS visible) AS weighed
),
matched AS MATERIALIZED (
    SELECT id, sum(idf) AS text
      FROM hits JOIN terms USING (term)
     WHERE true {kinds}
     GROUP BY id, created_at
    HAVING bool_or(selective)
     ORDER BY text DESC, created_at DESC, id DESC
     LIMIT %(candidates)s
)
SELECT id, text FROM matched
"""
# The second half, once the message has its vector: the words' candidates as the first half
# found them, the nearest vectors and the neighbours of both, scored and ranked. A candidate
# closed since the first half (moments ago) is left out with the rest.
SEARCH_SCORES_SQL = """
matched AS MATERIALIZED (
    SELECT id, text FROM unnest(%(matched_ids)s::bigint[], %(matched_texts)s::float8[])
                         AS found(id, text)
),
components AS MATERIALIZED (
    SELECT n.id, n.kind, n.topic, n.description, n.owner_id IS NULL AS is_global, n.created_at,
           n.source,
           GREATEST(COALESCE(1 - (n.{column} <=> %(vector)s::{column_type}), 0), 0) AS vector,
           COALESCE(matched.text, 0) AS text,
           power(0.5, date_part('epoch', now() - GREATEST(n.created_at, n.last_accessed_at))
                      / 86400.0 / %(half_life)s) AS recency,
           n.importance,
           -- models.confidence_share: the score on the facts' 0 to 1 scale
           GREATEST(n.confidence_score, 0)::float / (GREATEST(n.confidence_score, 0) + 2)
               AS confidence,
           (EXISTS (SELECT FROM unnest(%(date_from)s::timestamptz[], %(date_to)s::timestamptz[])
                        AS span(starts, ends)
                     WHERE n.created_at >= span.starts AND n.created_at < span.ends)
            OR EXTRACT(MONTH FROM n.created_at AT TIME ZONE 'UTC')::int
               = ANY(%(months)s::int[]))::int AS dated
      FROM (SELECT id FROM nearest UNION SELECT id FROM matched
            UNION
            (SELECT DISTINCT neighbour.id
               FROM memory_memorynode AS seed
              CROSS JOIN LATERAL (
                  SELECT id FROM memory_memorynode
                   WHERE owner_id = %(owner)s::int AND valid_to IS NULL {kinds}
                     AND created_at BETWEEN seed.created_at - %(neighbour)s::interval
                                        AND seed.created_at + %(neighbour)s::interval
                   -- Its own bound keeps this a range read of memnode_owner_recent for each
                   -- seed: without it the planner may join every row of an owner who holds
                   -- most of the table to every seed (70 ms at 10k rows).
                   LIMIT %(neighbours_each)s
              ) AS neighbour
              WHERE seed.id IN (SELECT id FROM nearest UNION SELECT id FROM matched)
                AND seed.owner_id = %(owner)s::int
              LIMIT %(neighbours_max)s)) AS candidates
      JOIN memory_memorynode AS n USING (id)
      LEFT JOIN matched USING (id)
     WHERE n.state <> 'quarantined' AND n.valid_to IS NULL
       -- Past its end, a fact is no longer true, though decay has not closed it yet.
       AND (n.valid_until IS NULL OR n.valid_until > now())
),
normalised AS (
    SELECT *,
           COALESCE((vector - min(vector) OVER ())
                    / NULLIF(max(vector) OVER () - min(vector) OVER (), 0), vector)
               AS vector_share,
           COALESCE(text / NULLIF(max(text) OVER (), 0), 0) AS text_share
      FROM components
),
own AS (
    SELECT *,
           (%(w_vector)s * vector_share + %(w_text)s * text_share + %(w_recency)s * recency
            + %(w_importance)s * importance + %(w_confidence)s * confidence
            + %(w_date)s * dated) / %(w_total)s
               AS own_score
      FROM normalised
),
in_context AS (
    SELECT *,
           COALESCE(max(own_score) OVER (
               PARTITION BY is_global ORDER BY created_at
               RANGE BETWEEN %(neighbour)s::interval PRECEDING AND %(neighbour)s::interval FOLLOWING
               EXCLUDE CURRENT ROW), 0) AS context
      FROM own
)
SELECT id, kind, topic, description, is_global, created_at,
       vector, text_share, recency, importance, confidence, context,
       (own_score + %(w_context)s * context) / (1 + %(w_context)s) AS score, source
  FROM in_context
 ORDER BY score DESC, id DESC
 LIMIT %(limit)s
"""
