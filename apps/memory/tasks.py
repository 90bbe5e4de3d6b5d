from __future__ import annotations

from celery import shared_task

from apps.memory import services
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
    return services.embeddings_fill_pending()


@shared_task(name="memory.mark_accessed", acks_late=True, ignore_result=True)
def mark_accessed(node_ids: list[int]) -> int:
    return services.memory_nodes_mark_accessed(node_ids=node_ids)
