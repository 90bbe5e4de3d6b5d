from __future__ import annotations

import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.db.models import Q

from apps.memory.embedding import EmbeddingError, get_embedder
from apps.memory.embedding_services import embeddings_refresh_batch
from apps.memory.models import EmbeddingStatus, Episode, MemoryNode

HNSW_INDEXES = {
    MemoryNode: "memnode_embedding_hnsw",
    Episode: "episode_embedding_hnsw",
}


def _column_dimension(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = 'embedding'",
            [table],
        )
        return cursor.fetchone()[0]


def _resize_column(model, dim: int) -> None:
    """A new dimension invalidates every vector: drop them, retype the column, rebuild the index
    (its build is fast on an empty column; rows fill it as they are re-embedded)."""
    table = model._meta.db_table
    index = HNSW_INDEXES[model]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {index}")
        cursor.execute(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({dim}) USING NULL")
        cursor.execute(
            f"CREATE INDEX {index} ON {table} USING hnsw (embedding vector_cosine_ops) "
            "WITH (m = 16, ef_construction = 64)"
        )
        # Last: an UPDATE queues deferred foreign-key checks, after which DDL is refused.
        cursor.execute(
            f"UPDATE {table} SET embedding_model = '', embedding_status = %s",
            [EmbeddingStatus.PENDING],
        )


class Command(BaseCommand):
    help = (
        "Re-embed memories and episodes whose vectors were made by another embedder, model or "
        "dimension. Resumable: rows already done are skipped when it runs again."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=128)

    def handle(self, *args, batch_size: int, **options):
        try:
            embedder = get_embedder()
        except EmbeddingError as exc:
            raise CommandError(str(exc))
        dim = settings.THALAMUS_EMBED_DIM
        self.stdout.write(f"Embedder: {embedder.marker}")
        for model in (MemoryNode, Episode):
            table = model._meta.db_table
            if _column_dimension(table) != dim:
                self.stdout.write(f"{table}: vectors resized to {dim} dimensions")
                _resize_column(model, dim)
            stale = model.objects.filter(~Q(embedding_model=embedder.marker) | Q(embedding=None))
            total = stale.count()
            done = 0
            self._progress(model._meta.verbose_name_plural, done, total)
            while True:
                try:
                    count = embeddings_refresh_batch(
                        model=model, embedder=embedder, batch_size=batch_size
                    )
                except EmbeddingError as exc:
                    sys.stderr.write("\n")
                    raise CommandError(
                        f"{exc}\n{done} of {total} re-embedded; run reembed again to resume."
                    )
                if not count:
                    break
                done += count
                self._progress(model._meta.verbose_name_plural, done, total)
            sys.stderr.write("\n")
        self.stdout.write(self.style.SUCCESS("All vectors are current."))

    def _progress(self, label: str, done: int, total: int) -> None:
        width = 30
        filled = width if not total else int(width * min(done, total) / total)
        sys.stderr.write(f"\r{label:>14} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        sys.stderr.flush()
