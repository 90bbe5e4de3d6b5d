from __future__ import annotations

from celery import shared_task

from apps.core.selectors import runtime_config
from apps.memory import (
    consolidation_services,
    embedding_services,
    forget_services,
    services,
    undo_services,
)
from apps.memory.embedding import EmbeddingConfigError, EmbeddingError


@shared_task(
    name="memory.embed_pending",
    acks_late=True,
    autoretry_for=(EmbeddingError,),
    dont_autoretry_for=(EmbeddingConfigError,),
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=False,
    max_retries=8,
)
def embed_pending() -> int:
    return embedding_services.embeddings_fill_pending()


@shared_task(name="memory.mark_accessed", acks_late=True, ignore_result=True)
def mark_accessed(node_ids: list[int]) -> int:
    return services.memory_nodes_mark_accessed(node_ids=node_ids)


@shared_task(
    name="memory.promote_and_link",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=240,
    time_limit=300,
)
def promote_and_link() -> int:
    config = runtime_config()
    result = consolidation_services.memories_promote_and_link(
        threshold=config.promotion_threshold,
        batch_size=config.batch_size,
        link_similarity=config.link_similarity,
        duplicate_similarity=config.duplicate_similarity,
        neighbours=config.link_neighbours,
    )
    return len(result.promoted) + len(result.merged)


@shared_task(
    name="memory.decay",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=240,
    time_limit=300,
)
def decay() -> int:
    """Close the facts whose time ran out, finish the forgets whose task was lost, then forget
    the stale, unconfirmed ones."""
    config = runtime_config()
    services.memories_expire()
    undo_services.memories_forget_overdue()
    counts = forget_services.memories_decay(
        decay_hours=config.decay_hours, minimum_score=config.minimum_score
    )
    return sum(counts.values())


@shared_task(name="memory.forget_pending", acks_late=True, ignore_result=True)
def forget_pending(node_id: int) -> bool:
    """A Forget's Undo has passed: the memory goes for good (nothing if it was undone, or its
    page already finished it)."""
    return undo_services.memory_node_forget_now(node_id=node_id) is not None
