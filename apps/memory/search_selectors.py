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
from apps.memory.search_sql import (
    ALL_WORDS,
    APPROXIMATE_NEAREST,
    EXACT_NEAREST,
    NO_NEAREST,
    SEARCH_FORMS_SQL,
    SEARCH_SCORES_SQL,
    TEXT_MATCH_SQL,
    VISIBLE_ROWS_SQL,
    WINDOW_SQL,
    WORDS_LOOKED_UP,
    WORDS_NOT_LOOKED_UP,
)

# Up to this many visible rows (own + global) an exact scan is used: exact, and at 10k rows per
# owner (1M rows, bench/README.md) much faster than the filtered HNSW path, whose recall there
# fell to 0.07. Above it the HNSW index with iterative scans keeps latency flat. Which one a
# search takes is decided on the owner's count of current rows, which the database keeps.
EXACT_SCAN_MAX_ROWS = 20000
# The HNSW path over-fetches this many times the candidates in relaxed order, then re-ranks them
# by exact distance.
HNSW_OVERFETCH = 2
# From this many visible rows on, the rows of a message's rare words are looked up (see
# search_sql.WORDS_LOOKED_UP); below it, the window holds all of the owner's rows. On a small
# table the planner reads each lookup's rows from a B-tree instead (7 ms for 37 forms over 30
# memories; at 50 users chatting, PostgreSQL's CPU a turn doubled).
FORM_LOOKUP_MIN_ROWS = 2000
# An owner with fewer visible rows than FORM_LOOKUP_MIN_ROWS has both statements of a search
# prepared, which PostgreSQL then plans once for all such owners when a generic plan does as
# well: planning was most of their time (for a new user 1.7-2.0 and 1.8 ms a turn, prepared 0.5
# and 0.6 ms), and every plan of theirs reads the owner's few rows through the owner's indexes.
# A bigger owner's are planned for their parameters each time (apps.core.db.fetch_hot says
# why). The prepared ones carry a comment of their own, so the two never share a statement.
FEW_ROWS_MARK = "/* few rows: prepared */ "
# A word of the message in up to this many of the owner's (and global) rows is rare: the lookup
# reads all its rows (each a table row). One in more is common (see search_sql.WORDS_LOOKED_UP).
WORD_LOOKUP_MAX_ROWS = 256
# The full text tests an owner's this many most recent memories against a common word, not all
# of them, so its cost is bounded whatever the words (see search_sql.WINDOW_SQL); an owner whose
# words are not looked up (fewer than FORM_LOOKUP_MIN_ROWS) is matched whole. 1,000 rather than
# 2,000 took 1.4 ms off a 10k-row owner's 11.5 ms search, with the same recall@10 against the
# unbounded ranking (0.999; bench/README.md, issue #29 item 3).
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
    # Where it comes from (MemoryNode.Source): the prompt datamarks what is data (provenance).
    source: str = ""

    def as_trace(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "global": self.is_global,
            "score": round(self.score, 4),
            "components": {name: round(value, 4) for name, value in self.components.items()},
            "context": round(self.context, 4),
        }


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


@dataclass
class TextMatch:
    """A search's first half, which needs no vector: the memories the words match best, with
    their text scores, and what the second half (`memory_search_ranked`) is asked with."""

    params: dict
    weights: Weights
    kinds: list[str]
    # (id, text score) of the words' candidates.
    matched: list[tuple[int, float]]
    # Both statements prepared: the owner has fewer than FORM_LOOKUP_MIN_ROWS visible rows.
    prepared: bool = False


def memory_text_query(
    *,
    user_id: int,
    text: str,
    limit: int,
    kinds: Iterable[str] = (),
    weights: Weights | None = None,
) -> tuple[str, dict]:
    """The words' statement of a search and its parameters, the owner's visible rows counted
    first (they choose its shape)."""
    weights = weights or Weights.from_config()
    kinds = [str(kind) for kind in kinds]
    dates = named_dates(text)
    candidates = max(limit * 4, 40)
    params = {
        "owner": int(user_id),
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
        "date_from": [start for start, _ in dates.spans],
        "date_to": [end for _, end in dates.spans],
        "months": dates.months,
        "limit": limit,
    }
    ((params["visible"],),) = fetch_hot(
        VISIBLE_ROWS_SQL,
        {
            "owner": params["owner"],
            "global_key": GLOBAL_COUNT_KEY,
            "visible_max": EXACT_SCAN_MAX_ROWS + 1,
        },
        prepare=True,
    )
    looked_up = params["visible"] >= FORM_LOOKUP_MIN_ROWS
    params["window"] = TEXT_WINDOW_ROWS if looked_up else FORM_LOOKUP_MIN_ROWS
    words = WORDS_LOOKED_UP if looked_up else WORDS_NOT_LOOKED_UP
    all_words = "false"
    if looked_up and len(params["words"]) > 1:
        all_words = " AND ".join(
            ALL_WORDS.format(number=number) for number in range(1, len(params["words"]) + 1)
        )
    sql = ("WITH" + SEARCH_FORMS_SQL + WINDOW_SQL + words + TEXT_MATCH_SQL).format(
        kinds="AND kind = ANY(%(kinds)s)" if kinds else "",
        short_text=SHORT_TEXT_MAX_BYTES,
        all_words=all_words,
    )
    return ("" if looked_up else FEW_ROWS_MARK) + sql, params


def memory_text_match(
    *,
    user_id: int,
    text: str,
    limit: int,
    kinds: Iterable[str] = (),
    weights: Weights | None = None,
) -> TextMatch:
    """The first half of `memory_search`, which needs no vector: a turn runs it while its
    message is embedded. A message without words matches nothing, and is not asked."""
    weights = weights or Weights.from_config()
    kinds = [str(kind) for kind in kinds]
    sql, params = memory_text_query(
        user_id=user_id, text=text, limit=limit, kinds=kinds, weights=weights
    )
    prepared = sql.startswith(FEW_ROWS_MARK)
    matched = fetch_hot(sql, params, prepare=prepared) if params["words"] else []
    return TextMatch(params, weights, kinds, [(id, float(text)) for id, text in matched], prepared)


def memory_ranking_query(match: TextMatch, *, vector: list[float] | None) -> tuple[str, dict]:
    """The scores' statement of a search and its parameters: the words' candidates, the nearest
    vectors (exact or HNSW by the owner's visible rows) and their neighbours, ranked."""
    weights = match.weights
    # Without a vector the vector weight leaves the total, so scores keep their 0..1 scale.
    w_vector = weights.vector if vector is not None else 0.0
    w_total = w_vector + weights.text + weights.recency + weights.importance + weights.confidence
    # Only a query that names a date gives the date match a weight: scores keep their scale.
    w_date = (
        weights.date_match * w_total if match.params["date_from"] or match.params["months"] else 0.0
    )
    params = {
        **match.params,
        "vector": QueryVector(vector) if vector is not None else None,
        "matched_ids": [id for id, _ in match.matched],
        "matched_texts": [text for _, text in match.matched],
        "w_vector": w_vector,
        "w_text": weights.text,
        "w_recency": weights.recency,
        "w_importance": weights.importance,
        "w_confidence": weights.confidence,
        "w_date": w_date,
        "w_total": (w_total + w_date) or 1.0,
        "w_context": weights.context,
    }
    # The candidates' cosine comes from the half-precision copy too: the full vector of a row is
    # out of line (TOAST), and reading 80-160 of them cost ~2 ms of a 10k-row owner's 14 ms
    # search; the two agree to ~1e-3 (bench/README.md, issue #29 item 3).
    half = settings.THALAMUS_EMBED_DIM <= HALF_VECTOR_MAX_DIM
    column = {
        "column": "embedding_half" if half else "embedding",
        "column_type": "halfvec" if half else "vector",
    }
    if vector is None:
        nearest = NO_NEAREST
    elif params["visible"] <= EXACT_SCAN_MAX_ROWS:
        nearest = EXACT_NEAREST.format(**column)
    else:
        nearest = APPROXIMATE_NEAREST
    sql = ("WITH" + nearest + SEARCH_SCORES_SQL).format(
        kinds="AND kind = ANY(%(kinds)s)" if match.kinds else "", **column
    )
    return (FEW_ROWS_MARK if match.prepared else "") + sql, params


def memory_search_ranked(match: TextMatch, *, vector: list[float] | None) -> list[MemoryHit]:
    """The second half of `memory_search`, once the message's vector is made (None: the
    embedder is down)."""
    sql, params = memory_ranking_query(match, vector=vector)
    # The connection runs HNSW scans iteratively (settings.HNSW_SESSION_OPTIONS): a filtered scan
    # otherwise stops after ef_search neighbours, most of them other users' rows, and returns
    # fewer than `limit` (see DESIGN.md, measured traps).
    rows = fetch_hot(sql, params, prepare=match.prepared)
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
            source=row[13],
        )
        for row in rows
    ]


def memory_search(
    *,
    user_id: int,
    text: str,
    vector: list[float] | None,
    limit: int,
    kinds: Iterable[str] = (),
    weights: Weights | None = None,
) -> list[MemoryHit]:
    """Hybrid search over the user's current memories and the global ones, best first: the
    words' half (`memory_text_match`), then the scores' (`memory_search_ranked`).

    Without a vector (the embedder is down) it ranks by full text and the other signals alone.
    """
    match = memory_text_match(user_id=user_id, text=text, limit=limit, kinds=kinds, weights=weights)
    return memory_search_ranked(match, vector=vector)
