"""Hybrid search over memories: vector, full text, recency, importance and
confidence, with neighbours and the dates a query names; the turn's, the tools' and MCP's recall.
Episodes are searched in `episode_selectors`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from apps.core.db import QueryVector, fetch_hot
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config
from apps.memory.models import (
    GLOBAL_COUNT_KEY,
    HALF_VECTOR_MAX_DIM,
    SHORT_TEXT_MAX_BYTES,
    STEMMED_LANGUAGES,
)
from apps.memory.query_text import named_dates, query_variants, query_words

# Up to this many visible rows (own + global) an exact scan is used: exact, and at 10k rows per
# owner (1M rows, bench/README.md) much faster than the filtered HNSW path, whose recall there
# fell to 0.07. Above it the HNSW index with iterative scans keeps latency flat. Which one a
# search takes is decided on the owner's count of current rows, which the database keeps.
EXACT_SCAN_MAX_ROWS = 20000
# The HNSW path over-fetches this many times the candidates in relaxed order, then re-ranks them
# by exact distance.
HNSW_OVERFETCH = 2
# From this many visible rows on, the rows of a message's rare words are looked up (see
# _WORDS_LOOKED_UP); below it, the window holds all of the owner's rows. On a small table the
# planner reads each lookup's rows from a B-tree instead (7 ms for 37 forms over 30 memories; at
# 50 users chatting, PostgreSQL's CPU a turn doubled).
FORM_LOOKUP_MIN_ROWS = 2000
# A word of the message in up to this many of the owner's (and global) rows is rare: the lookup
# reads all its rows (each a table row). One in more is common (see _WORDS_LOOKED_UP).
WORD_LOOKUP_MAX_ROWS = 256
# The full text tests an owner's this many most recent memories against a common word, not all
# of them, so its cost is bounded whatever the words (see _WINDOW_SQL); an owner whose words are
# not looked up (fewer than FORM_LOOKUP_MIN_ROWS) is matched whole. 1,000 rather than 2,000 took
# 1.4 ms off a 10k-row owner's 11.5 ms search, with the same recall@10 against the unbounded
# ranking (0.999; bench/README.md, issue #29 item 3).
TEXT_WINDOW_ROWS = 1000
# Words in more than about half of the memories (idf < ln 2) still add to the text score but do not
# pull memories in by themselves: a name or a date in every row would match them all.
MATCH_MIN_IDF = 0.69
RECENCY_HALF_LIFE_DAYS = 30
EMBED_TIMEOUT_SECONDS = 10.0
EPISODES_PER_TURN = 3
# A candidate's neighbours read at most: the turns of one exchange, not a bulk import's
# thousands made in the same minute.
NEIGHBOURS_EACH = 50
# A memory made in a period the query names ("in May 2023", "last week") gains this much, as a
# share of the other weights: what was said then is what a question about then asks for.
DATE_MATCH_WEIGHT = 0.2


@dataclass
class Weights:
    vector: float
    text: float
    recency: float
    importance: float
    confidence: float
    # How much a memory scores for its best neighbour; 0 ranks every memory on its own.
    context: float = 0.0
    # Memories made this close together are neighbours (turns of one exchange).
    neighbour_seconds: int = 60
    # What a memory made in a period the query names gains, as a share of the other weights.
    date_match: float = DATE_MATCH_WEIGHT

    @classmethod
    def from_config(cls, config: RuntimeConfig | None = None) -> Weights:
        config = config or runtime_config()
        return cls(
            vector=config.weight_vector,
            text=config.weight_text,
            recency=config.weight_recency,
            importance=config.weight_importance,
            confidence=config.weight_confidence,
            context=config.weight_context,
            neighbour_seconds=config.neighbour_seconds,
        )


@dataclass
class MemoryHit:
    id: int
    kind: str
    topic: str
    description: str
    is_global: bool
    created_at: datetime
    score: float
    components: dict[str, float]
    # The best own score among the memories made next to it, which its score also carries.
    context: float = 0.0

    def as_trace(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "global": self.is_global,
            "score": round(self.score, 4),
            "components": {name: round(value, 4) for name, value in self.components.items()},
            "context": round(self.context, 4),
        }


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
# of a common one only those in the window of the most recent rows (_WINDOW_SQL); a common word's
# document frequency is then estimated from its share of the window. Equal text scores rank the
# more recent first, as the window does. A memory past its valid_until is never returned.
# The owner's and the global current rows, as the database counts them (CurrentMemoryCount),
# capped where the search stops telling counts apart.
_VISIBLE_ROWS_SQL = """
SELECT LEAST(GREATEST(COALESCE(sum(rows), 0), 0), %(visible_max)s)::int
  FROM memory_currentmemorycount WHERE owner_key IN (%(owner)s::int, %(global_key)s)
"""
# The owner's and the global rows each in their own scan of memnode_owner_vectors, which holds
# every current row's half-precision vector next to its owner: one owner's rows are read
# together, without the table, where the table has them on pages all over it. Half precision
# orders them as the full vectors do but for near-ties, which the candidates' margin (4 × the
# limit) absorbs; the scores read the same copy. Above HALF_VECTOR_MAX_DIM dimensions the scan
# reads the table's vectors.
_EXACT_NEAREST = """
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
_APPROXIMATE_NEAREST = """
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
_NO_NEAREST = """
nearest AS (SELECT NULL::bigint AS id WHERE false),
"""
# The window: the owner's TEXT_WINDOW_ROWS most recent current memories (and as many global
# ones), read newest first from memnode_owner_recent_words (short ones, without the table) and
# memnode_owner_recent_long, and tested against the words. It bounds what a common word costs:
# matching, counting and ranking half of a 10k-row owner's memories took the full text to 14 ms
# (bench/README.md). An owner whose words are not looked up has a window of FORM_LOOKUP_MIN_ROWS,
# which holds all of their rows: matched whole, as before.
_WINDOW_SQL = """
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
_WORDS_LOOKED_UP = """
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
_ALL_WORDS = """memory_owner_lexemes(owner_id, tsv)
                && (SELECT keys FROM term_keys WHERE term = (%(words)s::text[])[{number}])"""
_WORDS_NOT_LOOKED_UP = """
counted AS (SELECT NULL::text AS term, NULL::bigint AS found WHERE false),
beyond_hits AS (
    SELECT NULL::bigint AS id, NULL::varchar AS kind, NULL::timestamptz AS created_at,
           NULL::text AS term
     WHERE false
),
"""
_SEARCH_FORMS_SQL = """
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
_SEARCH_SCORES_SQL = """
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
),
components AS MATERIALIZED (
    SELECT n.id, n.kind, n.topic, n.description, n.owner_id IS NULL AS is_global, n.created_at,
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
     WHERE n.state <> 'quarantined'
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
       (own_score + %(w_context)s * context) / (1 + %(w_context)s) AS score
  FROM in_context
 ORDER BY score DESC, id DESC
 LIMIT %(limit)s
"""


def _variant_pairs(words: list[str]) -> dict[str, list[str]]:
    pairs = [
        (word, variant)
        for word, variants in zip(words, query_variants(words), strict=True)
        for variant in variants
    ]
    return {
        "variant_words": [word for word, _ in pairs],
        "variants": [variant for _, variant in pairs],
    }


def memory_search_query(
    *,
    user_id: int,
    text: str,
    vector: list[float] | None,
    limit: int,
    kinds: Iterable[str] = (),
    weights: Weights | None = None,
) -> tuple[str, dict]:
    weights = weights or Weights.from_config()
    kinds = [str(kind) for kind in kinds]
    # Without a vector the vector weight leaves the total, so scores keep their 0..1 scale.
    w_vector = weights.vector if vector is not None else 0.0
    w_total = w_vector + weights.text + weights.recency + weights.importance + weights.confidence
    dates = named_dates(text)
    # Only a query that names a date gives the date match a weight: scores keep their scale.
    w_date = weights.date_match * w_total if dates else 0.0
    candidates = max(limit * 4, 40)
    params = {
        "owner": int(user_id),
        "vector": QueryVector(vector) if vector is not None else None,
        "words": (words := query_words(text)),
        # Each word with the words it is searched by: (word, itself), (word, its lemma), …
        **_variant_pairs(words),
        "languages": list(STEMMED_LANGUAGES),
        "min_idf": MATCH_MIN_IDF,
        "candidates": candidates,
        "overfetch": candidates * HNSW_OVERFETCH,
        # Memories imported at one moment are all each other's neighbours: a bound on them.
        "neighbours_max": candidates * 10,
        "neighbours_each": NEIGHBOURS_EACH,
        "word_lookup_max": WORD_LOOKUP_MAX_ROWS,
        "kinds": kinds,
        "half_life": RECENCY_HALF_LIFE_DAYS,
        "neighbour": f"{weights.neighbour_seconds} seconds",
        "w_vector": w_vector,
        "w_text": weights.text,
        "w_recency": weights.recency,
        "w_importance": weights.importance,
        "w_confidence": weights.confidence,
        "w_date": w_date,
        "date_from": [start for start, _ in dates.spans],
        "date_to": [end for _, end in dates.spans],
        "months": dates.months,
        "w_total": (w_total + w_date) or 1.0,
        "w_context": weights.context,
        "limit": limit,
    }
    ((params["visible"],),) = fetch_hot(
        _VISIBLE_ROWS_SQL,
        {
            "owner": params["owner"],
            "global_key": GLOBAL_COUNT_KEY,
            "visible_max": EXACT_SCAN_MAX_ROWS + 1,
        },
    )
    # The candidates' cosine comes from the half-precision copy too: the full vector of a row is
    # out of line (TOAST), and reading 80-160 of them cost ~2 ms of a 10k-row owner's 14 ms
    # search; the two agree to ~1e-3 (bench/README.md, issue #29 item 3).
    half = settings.THALAMUS_EMBED_DIM <= HALF_VECTOR_MAX_DIM
    column = {
        "column": "embedding_half" if half else "embedding",
        "column_type": "halfvec" if half else "vector",
    }
    if vector is None:
        nearest = _NO_NEAREST
    elif params["visible"] <= EXACT_SCAN_MAX_ROWS:
        nearest = _EXACT_NEAREST.format(**column)
    else:
        nearest = _APPROXIMATE_NEAREST
    looked_up = params["visible"] >= FORM_LOOKUP_MIN_ROWS
    params["window"] = TEXT_WINDOW_ROWS if looked_up else FORM_LOOKUP_MIN_ROWS
    words = _WORDS_LOOKED_UP if looked_up else _WORDS_NOT_LOOKED_UP
    all_words = "false"
    if looked_up and len(params["words"]) > 1:
        all_words = " AND ".join(
            _ALL_WORDS.format(number=number) for number in range(1, len(params["words"]) + 1)
        )
    sql = ("WITH" + nearest + _SEARCH_FORMS_SQL + _WINDOW_SQL + words + _SEARCH_SCORES_SQL).format(
        kinds="AND kind = ANY(%(kinds)s)" if kinds else "",
        short_text=SHORT_TEXT_MAX_BYTES,
        all_words=all_words,
        **column,
    )
    return sql, params


def memory_search(
    *,
    user_id: int,
    text: str,
    vector: list[float] | None,
    limit: int,
    kinds: Iterable[str] = (),
    weights: Weights | None = None,
) -> list[MemoryHit]:
    """Hybrid search over the user's current memories and the global ones, best first.

    Without a vector (the embedder is down) it ranks by full text and the other signals alone.
    """
    sql, params = memory_search_query(
        user_id=user_id, text=text, vector=vector, limit=limit, kinds=kinds, weights=weights
    )
    # The connection runs HNSW scans iteratively (settings.HNSW_SESSION_OPTIONS): a filtered scan
    # otherwise stops after ef_search neighbours, most of them other users' rows, and returns
    # fewer than `limit` (see DESIGN.md, measured traps).
    rows = fetch_hot(sql, params)
    return [
        MemoryHit(
            id=row[0],
            kind=row[1],
            topic=row[2],
            description=row[3],
            is_global=row[4],
            created_at=row[5],
            components={
                "vector": float(row[6]),
                "text": float(row[7]),
                "recency": float(row[8]),
                "importance": float(row[9]),
                "confidence": float(row[10]),
            },
            context=float(row[11]),
            score=float(row[12]),
        )
        for row in rows
    ]
