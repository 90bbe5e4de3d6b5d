"""Retrieval at scale: latency per turn and filtered recall@10 against exact search.

    .venv/bin/python -m bench.retrieval [--nodes 100000] [--users 100] [--dim 384] [--queries 300]

Runs on its own database (`thalamus_bench_retrieval`) in the embedded PostgreSQL, bulk-loads
random unit vectors with binary COPY (numpy, which the `local` extra brings), builds the HNSW
index, then times the real selectors: `memory_search` as the turn runs it (the exact scan or the
filtered HNSW index, by the owner's size), the same forced through the HNSW index, and the whole
`memory_context_for_turn`, embedding through the in-process LLM stub. The data is kept between
runs of the same shape.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta

from bench._harness import create_database

BENCH_DATABASE = "thalamus_bench_retrieval"
_VOCABULARY_TEXT = """
    coffee tea garden music jazz piano guitar running cycling hiking travel rome milan paris
    berlin madrid work project deadline meeting family sister brother daughter son dog cat
    birthday allergy doctor book novel film series cooking pasta pizza sushi wine beer
    python django database server holiday beach mountain winter summer exam school
"""
VOCABULARY = _VOCABULARY_TEXT.split()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--m", type=int, default=16, help="HNSW m")
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


def setup_django(dim: int) -> None:
    """Start the embedded servers, then point Django at the benchmark's own database."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")
    os.environ["THALAMUS_EMBED_DIM"] = str(dim)
    # Its own queue: nothing the selectors enqueue may reach a real worker.
    os.environ["THALAMUS_INSTANCE"] = "bench-retrieval"
    from apps.core import embedded

    if os.environ.get("DATABASE_URL"):
        # It truncates tables: never point it at a database that may hold real memories.
        sys.exit("bench.retrieval runs on the embedded PostgreSQL only; unset DATABASE_URL.")
    embedded.acquire()
    base = embedded.database_url()
    create_database(base, BENCH_DATABASE)
    os.environ["DATABASE_URL"] = base.replace(f"/{embedded.PG_DATABASE}?", f"/{BENCH_DATABASE}?")
    import logging

    import django

    django.setup()
    for noisy in ("thalamus.llm_stub", "httpx", "httpx2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def timed(label: str):
    class Timer:
        def __enter__(self):
            self.started = time.perf_counter()
            print(f"{label}…", end="", flush=True)
            return self

        def __exit__(self, *exc):
            self.seconds = time.perf_counter() - self.started
            print(f" {self.seconds:.1f} s", flush=True)

    return Timer()


COPY_CHUNK = 20_000


def load(args: argparse.Namespace) -> dict[str, float]:
    from django.db import connection

    nodes, users, dim = args.nodes, args.users, args.dim
    shape = f"{nodes}:{users}:{dim}:{args.m}:{args.ef_construction}"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(DISTINCT owner_id), max(embedding_model) FROM memory_memorynode"
        )
        count, owners, marker = cursor.fetchone()
        if count == nodes and owners == users and marker == f"bench:{shape}":
            print(f"Reusing {nodes} nodes over {users} users ({dim} dimensions).")
            return {}
        figures = {}
        cursor.execute("TRUNCATE memory_memorynode, auth_user CASCADE")
        cursor.execute("DROP INDEX IF EXISTS memnode_embedding_hnsw")
        cursor.execute(f"ALTER TABLE memory_memorynode ALTER COLUMN embedding TYPE vector({dim})")
        cursor.execute(
            """
            INSERT INTO auth_user (password, is_superuser, username, first_name, last_name,
                                   email, is_staff, is_active, date_joined)
            SELECT '!', false, 'bench' || g, '', '', '', false, true, now()
              FROM generate_series(1, %s) AS g
            """,
            [users],
        )
        cursor.execute("SELECT id FROM auth_user ORDER BY id")
        owner_ids = [row[0] for row in cursor.fetchall()]
        with timed(f"COPY of {nodes} nodes over {users} users") as timer:
            _copy_nodes(connection.connection, owner_ids, args, f"bench:{shape}")
        figures["load_s"] = timer.seconds
        with timed(
            f"Building the HNSW index (m={args.m}, ef_construction={args.ef_construction})"
        ) as timer:
            cursor.execute("SET maintenance_work_mem = '2GB'")
            cursor.execute("SET max_parallel_maintenance_workers = 1")
            cursor.execute(
                "CREATE INDEX memnode_embedding_hnsw ON memory_memorynode "
                "USING hnsw (embedding vector_cosine_ops) "
                f"WITH (m = {args.m}, ef_construction = {args.ef_construction})"
            )
        figures["index_s"] = timer.seconds
        cursor.execute("VACUUM ANALYZE memory_memorynode")
    return figures


def _copy_nodes(
    raw_connection, owner_ids: list[int], args: argparse.Namespace, marker: str
) -> None:
    """Binary COPY in chunks; owners interleave, so each owner's rows spread over the table."""
    import numpy as np
    from django.utils import timezone
    from pgvector import Vector
    from pgvector.psycopg import register_vector

    register_vector(raw_connection)
    rng = np.random.default_rng(args.seed)
    now = timezone.now()
    columns = (
        "owner_id, description, kind, topic, fact_key, state, confidence_score, importance, "
        "origin_context, embedding, embedding_status, embedding_model, created_at"
    )
    types = ["int4", "text", "varchar", "varchar", "varchar", "varchar", "int4", "float8"]
    types += ["text", "vector", "varchar", "varchar", "timestamptz"]
    sql = f"COPY memory_memorynode ({columns}) FROM STDIN WITH (FORMAT BINARY)"
    with raw_connection.cursor() as cursor, cursor.copy(sql) as copy:
        copy.set_types(types)
        for start in range(0, args.nodes, COPY_CHUNK):
            size = min(COPY_CHUNK, args.nodes - start)
            vectors = rng.standard_normal((size, args.dim), dtype=np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            words = rng.integers(0, len(VOCABULARY), (size, 6))
            ages = rng.random(size) * 365
            for i in range(size):
                row = start + i
                copy.write_row(
                    (
                        owner_ids[row % len(owner_ids)],
                        " ".join(VOCABULARY[w] for w in words[i]),
                        "fact",
                        "",
                        "",
                        "promoted",
                        1 + row % 5,
                        float(rng.random()),
                        "",
                        Vector(vectors[i]),
                        "ready",
                        marker,
                        now - timedelta(days=float(ages[i])),
                    )
                )


def random_unit_vector(rng: random.Random, dim: int) -> list[float]:
    vector = [rng.gauss(0, 1) for _ in range(dim)]
    norm = sum(v * v for v in vector) ** 0.5
    return [v / norm for v in vector]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def exact_top(user_id: int, vector: list[float], k: int) -> set[int]:
    from django.db import connection

    from apps.memory.embedding import vector_literal

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT id FROM memory_memorynode
             WHERE (owner_id = %s::int OR owner_id IS NULL) AND valid_to IS NULL
             ORDER BY (embedding <=> %s::vector) + 0 LIMIT %s
            """,
            [user_id, vector_literal(vector), k],
        )
        return {row[0] for row in cursor.fetchall()}


def measure_search(owner_ids: list[int], args: argparse.Namespace, exact_max: int) -> dict:
    from apps.memory import selectors
    from apps.memory.selectors import Weights, memory_search

    default, selectors.EXACT_SCAN_MAX_ROWS = selectors.EXACT_SCAN_MAX_ROWS, exact_max
    vector_only = Weights(vector=1, text=0, recency=0, importance=0, confidence=0)
    rng = random.Random(args.seed)
    latencies, recalls, counts = [], [], []
    for _ in range(args.queries):
        owner = rng.choice(owner_ids)
        vector = random_unit_vector(rng, args.dim)
        text = " ".join(rng.sample(VOCABULARY, 3))
        started = time.perf_counter()
        hits = memory_search(user_id=owner, text=text, vector=vector, limit=10)
        latencies.append((time.perf_counter() - started) * 1000)
        counts.append(len(hits))
        nearest = memory_search(
            user_id=owner, text="", vector=vector, limit=10, weights=vector_only
        )
        recalls.append(len(exact_top(owner, vector, 10) & {hit.id for hit in nearest}) / 10)
    selectors.EXACT_SCAN_MAX_ROWS = default
    return {
        "median_ms": statistics.median(latencies),
        "p95_ms": percentile(latencies, 0.95),
        "recall@10": statistics.mean(recalls),
        "min_hits": min(counts),
    }


def measure_turn(owner_ids: list[int], args: argparse.Namespace) -> dict:
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from apps.cognition.context import memory_context_for_turn
    from llm_stub import StubServer

    rng = random.Random(args.seed + 1)
    users = {user.pk: user for user in get_user_model().objects.filter(pk__in=owner_ids)}
    latencies = []
    with StubServer(port=0, dim=args.dim) as stub:
        settings.THALAMUS_LLM_BASE_URL = stub.url
        for _ in range(args.queries):
            user = users[rng.choice(owner_ids)]
            text = "Tell me about " + " and ".join(rng.sample(VOCABULARY, 3))
            started = time.perf_counter()
            context = memory_context_for_turn(user=user, conversation=None, text=text)
            latencies.append((time.perf_counter() - started) * 1000)
            assert context.trace["vector_search"], context.trace.get("embedding_error")
    return {"median_ms": statistics.median(latencies), "p95_ms": percentile(latencies, 0.95)}


def main() -> None:
    args = parse_args()
    setup_django(args.dim)
    from apps.core import embedded

    try:
        figures = load(args)
        from django.contrib.auth import get_user_model

        from apps.memory.selectors import EXACT_SCAN_MAX_ROWS

        owner_ids = list(get_user_model().objects.values_list("pk", flat=True))
        print(
            f"\n{args.nodes} nodes, {args.users} users (~{args.nodes // args.users} each), "
            f"{args.dim} dimensions, {args.queries} queries per line"
        )
        paths = (
            ("as the turn runs it", EXACT_SCAN_MAX_ROWS),
            ("forced exact scan", 10**9),
            ("forced through HNSW", 0),
        )
        for label, exact_max in paths:
            result = measure_search(owner_ids, args, exact_max)
            print(
                f"memory_search, {label:<26} median {result['median_ms']:.1f} ms, "
                f"p95 {result['p95_ms']:.1f} ms, recall@10 {result['recall@10']:.3f}, "
                f"fewest hits {result['min_hits']}"
            )
        turn = measure_turn(owner_ids, args)
        print(
            f"memory_context_for_turn (stub embedding) median {turn['median_ms']:.1f} ms, "
            f"p95 {turn['p95_ms']:.1f} ms"
        )
        for name, seconds in figures.items():
            print(f"{name}: {seconds:.1f} s")
    finally:
        from thalamus_site.celery import app

        app.control.purge()
        os.environ.pop("DATABASE_URL", None)
        embedded.release()


if __name__ == "__main__":
    sys.exit(main())
