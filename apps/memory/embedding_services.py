"""The vectors of memories and episodes: made now when the embedder answers, else after commit
by a task; filled in for pending rows and made again for rows an earlier embedder made."""

from __future__ import annotations

import logging

from django.db import connection
from django.db.models import Q

from apps.core.services import task_send_on_commit
from apps.memory.embedding import (
    Embedder,
    EmbeddingConfigError,
    EmbeddingError,
    get_embedder,
    vector_literal,
)
from apps.memory.models import EmbeddingStatus, Episode, MemoryNode

logger = logging.getLogger(__name__)

EMBED_BATCH = 128


def embedding_try(*, text: str) -> tuple[list[float] | None, str]:
    """A vector and the embedder's marker, or (None, "") when embedding is impossible now."""
    try:
        embedder = get_embedder()
        return embedder.embed([text])[0], embedder.marker
    except EmbeddingError as exc:
        logger.warning("embedding deferred: %s", exc)
        return None, ""


def embeddings_fill_later() -> None:
    """Embed the pending rows once this transaction commits (`embeddings_fill_pending`)."""
    # By name: memory's tasks import these services, not the other way round.
    task_send_on_commit("memory.embed_pending")


def _set_embeddings(
    *, table: str, ids: list[int], vectors: list[list[float]], marker: str, only_pending: bool
) -> int:
    """Write many vectors in one statement."""
    condition = "AND t.embedding_status = 'pending'" if only_pending else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {table} AS t
               SET embedding = v.embedding::vector,
                   embedding_model = %s,
                   embedding_status = 'ready'
              FROM unnest(%s::bigint[], %s::text[]) AS v(id, embedding)
             WHERE t.id = v.id {condition}
            """,
            [marker, ids, [vector_literal(vector) for vector in vectors]],
        )
        return cursor.rowcount


def _rows_to_embed(model: type[MemoryNode] | type[Episode], queryset, limit: int):
    rows = list(queryset.order_by("id")[:limit])
    return [row.id for row in rows], [row.embedding_text for row in rows]


def embeddings_fill_pending(
    *, batch_size: int = EMBED_BATCH, embedder: Embedder | None = None
) -> int:
    """Embed every pending node and episode; returns how many were embedded.

    Safe to run concurrently or twice: only rows still pending are written. An embedder that can
    never succeed as configured marks the batch failed rather than retrying forever.
    """
    embedder = embedder or get_embedder()
    done = 0
    for model in (MemoryNode, Episode):
        last_id = 0
        while True:
            pending = model.objects.filter(embedding_status=EmbeddingStatus.PENDING, id__gt=last_id)
            ids, texts = _rows_to_embed(model, pending, batch_size)
            if not ids:
                break
            last_id = ids[-1]
            try:
                vectors = embedder.embed(texts)
            except EmbeddingConfigError:
                model.objects.filter(id__in=ids, embedding_status=EmbeddingStatus.PENDING).update(
                    embedding_status=EmbeddingStatus.FAILED
                )
                raise
            done += _set_embeddings(
                table=model._meta.db_table,
                ids=ids,
                vectors=vectors,
                marker=embedder.marker,
                only_pending=True,
            )
    return done


def embeddings_refresh_batch(
    *, model: type[MemoryNode] | type[Episode], embedder: Embedder, batch_size: int = EMBED_BATCH
) -> int:
    """Re-embed one batch of rows whose vector was not made by `embedder`; 0 when none is left."""
    stale = model.objects.filter(~Q(embedding_model=embedder.marker) | Q(embedding=None))
    ids, texts = _rows_to_embed(model, stale, batch_size)
    if not ids:
        return 0
    vectors = embedder.embed(texts)
    _set_embeddings(
        table=model._meta.db_table,
        ids=ids,
        vectors=vectors,
        marker=embedder.marker,
        only_pending=False,
    )
    return len(ids)
