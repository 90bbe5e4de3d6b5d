"""Memory's tables, one module per kind of thing remembered; imported here so that Django finds
them and the rest of the project imports them from `apps.memory.models`."""

from __future__ import annotations

from apps.core.categories import Category
from apps.core.confidence import confidence_share, score_at_least, score_at_most
from apps.memory.models.columns import (
    HALF_VECTOR_MAX_DIM,
    SHORT_TEXT_MAX_BYTES,
    STEMMED_LANGUAGES,
    EmbeddingStatus,
)
from apps.memory.models.critiques import Critique
from apps.memory.models.episodes import Episode, EpisodeFailure
from apps.memory.models.graph import KnowledgeVersion, Predicate, Triple
from apps.memory.models.nodes import (
    GLOBAL_COUNT_KEY,
    CurrentMemoryCount,
    MemoryLink,
    MemoryNode,
)
from apps.memory.models.world import (
    WORLD_MAX_BEHAVIOUR,
    WORLD_MAX_CHARS,
    RetrievalPlan,
    WorldState,
)

__all__ = [
    "GLOBAL_COUNT_KEY",
    "HALF_VECTOR_MAX_DIM",
    "SHORT_TEXT_MAX_BYTES",
    "STEMMED_LANGUAGES",
    "WORLD_MAX_BEHAVIOUR",
    "WORLD_MAX_CHARS",
    "Category",
    "Critique",
    "CurrentMemoryCount",
    "EmbeddingStatus",
    "Episode",
    "EpisodeFailure",
    "KnowledgeVersion",
    "MemoryLink",
    "MemoryNode",
    "Predicate",
    "RetrievalPlan",
    "Triple",
    "WorldState",
    "confidence_share",
    "score_at_least",
    "score_at_most",
]
