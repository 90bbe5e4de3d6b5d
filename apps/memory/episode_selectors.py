"""The user's episodes closest to a message: vector, full text and recency over the few
episodes a user has, in one exact scan."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from apps.core.db import QueryVector, fetch_hot
from apps.memory.models import STEMMED_LANGUAGES
from apps.memory.query_text import query_variants, query_words
from apps.memory.search_selectors import RECENCY_HALF_LIFE_DAYS, Weights


@dataclass
class EpisodeHit:
    id: int
    summary: str
    lesson: str
    ended_at: datetime
    score: float
    components: dict[str, float]

    def as_trace(self) -> dict:
        return {
            "id": self.id,
            "score": round(self.score, 4),
            "components": {name: round(value, 4) for name, value in self.components.items()},
        }


# Each of the owner's episodes is scored once (materialised), against a query parsed once: the
# rank of its words only where they match (elsewhere it is 0 anyway), the recency in floating
# point (numeric powers cost ~20 µs each); the texts are read for the few returned. The message's
# words are stemmed in every one of models.STEMMED_LANGUAGES, as the episodes' are. The rank's
# query keeps only the forms that the matching episodes have: ts_rank_cd costs by the query's
# size (~70 µs an episode against ~45 forms), and a form an episode lacks changes nothing of its
# rank. Each form is looked for with @@ (a binary search in each matching episode's words):
# re-reading every matching episode's words once a form took 11.6 ms for ten forms over 200
# matching episodes (bench/README.md, issue #29 item 4).
_EPISODE_SEARCH_SQL = """
WITH stemmed AS MATERIALIZED (
    SELECT DISTINCT form
      FROM unnest(%(words)s::text[]) AS word
     CROSS JOIN unnest(%(languages)s::regconfig[]) AS language
     CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector(language, word))) AS form
),
every_form AS MATERIALIZED (
    SELECT string_agg(quote_literal(form), ' | ')::tsquery AS query FROM stemmed
),
scored AS MATERIALIZED (
    SELECT id, ended_at,
           GREATEST(COALESCE(1 - (embedding <=> %(vector)s::vector), 0), 0) AS vector,
           CASE WHEN tsv @@ (SELECT query FROM every_form) THEN tsv END AS worded,
           power(0.5, date_part('epoch', now() - ended_at) / 86400.0 / %(half_life)s) AS recency
      FROM memory_episode
     WHERE owner_id = %(owner)s::int
),
asked AS MATERIALIZED (
    SELECT string_agg(quote_literal(form), ' | ')::tsquery AS query
      FROM stemmed
     WHERE EXISTS (SELECT FROM scored WHERE worded @@ quote_literal(form)::tsquery)
),
ranked AS MATERIALIZED (
    SELECT id, ended_at, vector, recency,
           COALESCE(ts_rank_cd(worded, (SELECT query FROM asked), 32), 0) AS text
      FROM scored
),
best AS (
    SELECT id, ended_at, vector, text, recency,
           (%(w_vector)s * vector + %(w_text)s * text + %(w_recency)s * recency) / %(w_total)s
               AS score
      FROM ranked
     WHERE vector > 0 OR text > 0
     ORDER BY score DESC, id DESC
     LIMIT %(limit)s
)
SELECT best.id, episode.summary, episode.lesson, best.ended_at, best.vector, best.text,
       best.recency, best.score
  FROM best JOIN memory_episode AS episode USING (id)
 ORDER BY best.score DESC, best.id DESC
"""


def episode_search(
    *,
    user_id: int,
    text: str,
    vector: list[float] | None,
    limit: int,
    weights: Weights | None = None,
) -> list[EpisodeHit]:
    """The user's episodes closest to the text; a user has few, so an exact scan is cheap."""
    weights = weights or Weights.from_config()
    w_vector = weights.vector if vector is not None else 0.0
    params = {
        "owner": int(user_id),
        "vector": QueryVector(vector) if vector is not None else None,
        # Each word and the words it is searched by ("ran", "run"): one OR'd query, no per-word
        # score.
        "words": list(
            dict.fromkeys(
                variant for variants in query_variants(query_words(text)) for variant in variants
            )
        ),
        "languages": list(STEMMED_LANGUAGES),
        "half_life": RECENCY_HALF_LIFE_DAYS,
        "w_vector": w_vector,
        "w_text": weights.text,
        "w_recency": weights.recency,
        "w_total": (w_vector + weights.text + weights.recency) or 1.0,
        "limit": limit,
    }
    # Prepared: planning was most of its time (1-2 ms a turn), and any plan of it reads all of
    # the owner's episodes (no index orders them by score), by the owner's index or a scan.
    rows = fetch_hot(_EPISODE_SEARCH_SQL, params, prepare=True)
    return [
        EpisodeHit(
            id=row[0],
            summary=row[1],
            lesson=row[2],
            ended_at=row[3],
            components={"vector": float(row[4]), "text": float(row[5]), "recency": float(row[6])},
            score=float(row[7]),
        )
        for row in rows
    ]
