"""Retrieval at scale: a turn's memory context, each of its reads, and vector recall@10.

    .venv/bin/python -m bench.retrieval [--nodes 100000] [--users 100] [--words 64]
        [--dim 384] [--queries 300] [--hnsw]

Runs on its own database (`thalamus_bench_retrieval`) in the embedded PostgreSQL. Bulk-loads
random unit vectors with binary COPY (numpy, which the `local` extra brings), owners interleaved
so each one's rows spread over the whole table, then builds the recall's indexes (timed, with
their sizes), and gives each user a quarter as many triples and a twentieth as many episodes.
Then it times the real selectors, each over `--queries` random users: `memory_search` as the turn
runs it (with recall@10 of its vector ranking against an exact full-precision scan, and the
fewest hits against min(10, the user's rows)), its full-text branch alone (no vector), the graph
read (whole, and unchanged since the process last read it: its versions only), the episode
search, and the whole `memory_context_for_turn` with the message's vector already made
(embedding excluded), with each user's graph unchanged since their warm-up turn and again read
whole every turn. `--hnsw` also builds the HNSW index (20 min at 1M rows) and
times the big-owner path forced through it. The data is kept between runs of the same shape.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from concurrent.futures import Future
from datetime import timedelta

from bench._harness import cpu_reference_ms, create_database

BENCH_DATABASE = "thalamus_bench_retrieval"
_VOCABULARY_TEXT = """
    coffee tea garden music jazz piano guitar running cycling hiking travel rome milan paris
    berlin madrid work project deadline meeting family sister brother daughter son dog cat
    birthday allergy doctor book novel film series cooking pasta pizza sushi wine beer
    python django database server holiday beach mountain winter summer exam school
"""
# 51 words, six to a memory: each word is in 11 % of all memories, far more than in real text,
# so the full-text figures of the default are a worst case. `--words N` adds made-up words.
VOCABULARY = _VOCABULARY_TEXT.split()
# The recall's indexes (memory 0010, 0011, 0013), rebuilt after the bulk load as migrations do.
RECALL_INDEXES = {
    "memorynode": (
        "memnode_owner_vectors",
        "memnode_owner_recent_words",
        "memnode_owner_recent_long",
        "memnode_owner_lexemes",
        "memnode_owner_long_tsv",
        "memnode_owner_recent",
    ),
    "triple": ("triple_owner_known",),
}
TRIPLES_PER_NODE = 1 / 4
EPISODES_PER_NODE = 1 / 20


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--users", "--owners", type=int, default=100)
    parser.add_argument("--words", type=int, default=len(VOCABULARY), help="vocabulary size")
    parser.add_argument("--hnsw", action="store_true", help="build the HNSW index and time it")
    parser.add_argument("--m", type=int, default=16, help="HNSW m")
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


def vocabulary(size: int) -> list[str]:
    return (VOCABULARY + [f"word{i}" for i in range(max(0, size - len(VOCABULARY)))])[:size]


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
    """The data of this shape, loaded unless it is there already; build times in seconds."""
    from django.db import connection

    from apps.memory.models import Episode, MemoryNode, Triple

    nodes, users, dim = args.nodes, args.users, args.dim
    shape = f"{nodes}:{users}:{dim}:{args.words}"
    figures = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(DISTINCT owner_id), max(embedding_model) FROM memory_memorynode"
        )
        count, owners, marker = cursor.fetchone()
        if count == nodes and owners == users and marker == f"bench:{shape}":
            print(f"Reusing {nodes} nodes over {users} users ({dim} dimensions).")
        else:
            cursor.execute("TRUNCATE memory_memorynode, memory_episode, auth_user CASCADE")
            # Built after the bulk load, as a migration builds them on existing rows.
            for name in (
                "memnode_embedding_hnsw",
                "episode_embedding_hnsw",
                *RECALL_INDEXES["memorynode"],
            ):
                cursor.execute(f"DROP INDEX IF EXISTS {name}")
            for table in ("memory_memorynode", "memory_episode"):
                cursor.execute(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({dim})")
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
            figures["COPY of the memories"] = timer.seconds
            figures.update(_build_indexes(MemoryNode, RECALL_INDEXES["memorynode"]))
            _graph_and_episodes(owner_ids, args)
            figures.update(_build_indexes(Triple, RECALL_INDEXES["triple"]))
            figures.update(_build_indexes(Episode, ("episode_embedding_hnsw",)))
            with timed("VACUUM ANALYZE") as timer:
                for table in ("memory_memorynode", "memory_triple", "memory_episode"):
                    cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = 'memnode_embedding_hnsw'")
        if args.hnsw and not cursor.fetchone():
            label = f"Building the HNSW index (m={args.m}, ef_construction={args.ef_construction})"
            with timed(label) as timer:
                cursor.execute("SET maintenance_work_mem = '2GB'")
                cursor.execute("SET max_parallel_maintenance_workers = 1")
                cursor.execute(
                    "CREATE INDEX memnode_embedding_hnsw ON memory_memorynode "
                    "USING hnsw (embedding vector_cosine_ops) "
                    f"WITH (m = {args.m}, ef_construction = {args.ef_construction})"
                )
            figures["memnode_embedding_hnsw"] = timer.seconds
    return figures


def _build_indexes(model, names: tuple[str, ...]) -> dict[str, float]:
    """Build the named indexes of `model` as its migration does; seconds each."""
    from django.db import connection

    built = {}
    with connection.schema_editor() as editor:
        for index in model._meta.indexes:
            if index.name in names:
                editor.execute(f"DROP INDEX IF EXISTS {index.name}")
                with timed(f"Building {index.name}") as timer:
                    editor.add_index(model, index)
                built[index.name] = timer.seconds
    return built


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
    words = vocabulary(args.words)
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
            picks = rng.integers(0, len(words), (size, 6))
            ages = rng.random(size) * 365
            for i in range(size):
                row = start + i
                copy.write_row(
                    (
                        owner_ids[row % len(owner_ids)],
                        " ".join(words[w] for w in picks[i]),
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


def _graph_and_episodes(owner_ids: list[int], args: argparse.Namespace) -> None:
    """Triples and episodes in proportion to the memories, owners interleaved as theirs."""
    from django.db import connection

    from apps.core.categories import Category
    from apps.memory.models import Predicate

    predicates = [
        Predicate.objects.get_or_create(name=f"bench_relation_{i}")[0].pk for i in range(20)
    ]
    with connection.cursor() as cursor, timed("Triples and episodes"):
        cursor.execute(
            """
            INSERT INTO memory_triple (owner_id, subject, predicate_id, object, category,
                                       confidence, provenance, valid_from)
            SELECT (%(owners)s::int[])[1 + g %% %(users)s], 'user',
                   (%(predicates)s::bigint[])[1 + (g * 7) %% %(predicate_count)s],
                   'value ' || g, (%(categories)s::text[])[1 + (g * 3) %% %(category_count)s],
                   random(), '', now()
              FROM generate_series(0, %(total)s - 1) AS g
            """,
            {
                "owners": owner_ids,
                "users": len(owner_ids),
                "predicates": predicates,
                "predicate_count": len(predicates),
                "categories": list(Category.values),
                "category_count": len(Category.values),
                "total": int(args.nodes * TRIPLES_PER_NODE),
            },
        )
        cursor.execute(
            f"""
            INSERT INTO memory_episode (owner_id, summary, decisions, outcome, lesson, embedding,
                                        embedding_status, embedding_model, started_at, ended_at,
                                        created_at)
            SELECT (%(owners)s::int[])[1 + g %% %(users)s],
                   (SELECT string_agg(word[1 + floor(random() * %(word_count)s)::int], ' ')
                      FROM generate_series(1, 12), CAST(%(words)s AS text[]) AS word
                     WHERE g >= 0),
                   '', '', '',
                   (SELECT array_agg(random() - 0.5) FROM generate_series(1, {args.dim})
                     WHERE g >= 0)::vector({args.dim}),
                   'ready', 'bench', now() - g * interval '1 minute',
                   now() - g * interval '1 minute', now()
              FROM generate_series(0, %(total)s - 1) AS g
            """,
            {
                "owners": owner_ids,
                "users": len(owner_ids),
                "words": vocabulary(args.words),
                "word_count": args.words,
                "total": int(args.nodes * EPISODES_PER_NODE),
            },
        )


def random_unit_vector(rng: random.Random, dim: int) -> list[float]:
    vector = [rng.gauss(0, 1) for _ in range(dim)]
    norm = sum(v * v for v in vector) ** 0.5
    return [v / norm for v in vector]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def exact_tops(asked: list[tuple[int, list[float]]], k: int) -> list[set[int]]:
    """For each (owner, vector), the true nearest k of its rows by full-precision distance.

    All of them in one sequential scan of the table, which PostgreSQL reads through a small ring
    of its cache: reading each owner's rows by its index instead would fill the cache with table
    pages and push out the recall's indexes before the turns are timed.
    """
    from django.db import connection, transaction

    from apps.memory.embedding import vector_literal

    with transaction.atomic(), connection.cursor() as cursor:
        for scan in ("indexscan", "indexonlyscan", "bitmapscan"):
            cursor.execute(f"SET LOCAL enable_{scan} = off")
        cursor.execute(
            """
            WITH asked AS MATERIALIZED (
                SELECT i, owner, vector::vector AS vector
                  FROM unnest(%s::int[], %s::int[], %s::text[]) AS asked(i, owner, vector)
            ),
            visible AS (
                SELECT asked.i, n.id, n.embedding <=> asked.vector AS distance
                  FROM memory_memorynode AS n JOIN asked ON n.owner_id = asked.owner
                 WHERE n.valid_to IS NULL
                UNION ALL
                SELECT asked.i, n.id, n.embedding <=> asked.vector
                  FROM memory_memorynode AS n CROSS JOIN asked
                 WHERE n.owner_id IS NULL AND n.valid_to IS NULL
            )
            SELECT i, id FROM (
                SELECT i, id, row_number() OVER (PARTITION BY i ORDER BY distance, id) AS rank
                  FROM visible
            ) AS ranked
             WHERE rank <= %s
            """,
            [
                list(range(len(asked))),
                [owner for owner, _ in asked],
                [vector_literal(vector) for _, vector in asked],
                k,
            ],
        )
        tops: list[set[int]] = [set() for _ in asked]
        for i, node_id in cursor.fetchall():
            tops[i].add(node_id)
        return tops


def visible_rows(user_id: int) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        # Two counts an index answers alone: an OR would read the owner's table pages.
        cursor.execute(
            "SELECT (SELECT count(*) FROM memory_memorynode "
            "         WHERE owner_id = %s::int AND valid_to IS NULL) "
            "     + (SELECT count(*) FROM memory_memorynode "
            "         WHERE owner_id IS NULL AND valid_to IS NULL)",
            [user_id],
        )
        return cursor.fetchone()[0]


def _timing(latencies: list[float]) -> str:
    return f"median {statistics.median(latencies):.1f} ms, p95 {percentile(latencies, 0.95):.1f} ms"


def _queries(owner_ids: list[int], args: argparse.Namespace, salt: int):
    rng = random.Random(args.seed + salt)
    words = vocabulary(args.words)
    for _ in range(args.queries):
        yield rng.choice(owner_ids), random_unit_vector(rng, args.dim), rng.sample(words, 3)


def unbounded_top(owner: int, text: str, vector: list[float] | None) -> set[int]:
    """The top 10 with the full text matching, counting and ranking every row with the words."""
    from apps.memory import search_selectors

    default, search_selectors.TEXT_WINDOW_ROWS = search_selectors.TEXT_WINDOW_ROWS, 10**9
    try:
        hits = search_selectors.memory_search(user_id=owner, text=text, vector=vector, limit=10)
    finally:
        search_selectors.TEXT_WINDOW_ROWS = default
    return {hit.id for hit in hits}


def _overlap(hits: list, top: set[int]) -> float:
    return len({hit.id for hit in hits} & top) / max(len(top), 1)


def measure_search(owner_ids: list[int], args: argparse.Namespace, exact_max: int) -> str:
    from apps.memory import search_selectors
    from apps.memory.search_selectors import Weights, memory_search

    default, search_selectors.EXACT_SCAN_MAX_ROWS = search_selectors.EXACT_SCAN_MAX_ROWS, exact_max
    vector_only = Weights(vector=1, text=0, recency=0, importance=0, confidence=0)
    latencies, nearest, asked, short, against_unbounded = [], [], [], 0, []
    for owner, vector, words in _queries(owner_ids, args, 0):
        started = time.perf_counter()
        hits = memory_search(user_id=owner, text=" ".join(words), vector=vector, limit=10)
        latencies.append((time.perf_counter() - started) * 1000)
        short += len(hits) < min(10, visible_rows(owner))
        against_unbounded.append(_overlap(hits, unbounded_top(owner, " ".join(words), vector)))
        found = memory_search(user_id=owner, text="", vector=vector, limit=10, weights=vector_only)
        nearest.append({hit.id for hit in found})
        asked.append((owner, vector))
    search_selectors.EXACT_SCAN_MAX_ROWS = default
    recalls = [
        len(top & found) / 10 for top, found in zip(exact_tops(asked, 10), nearest, strict=True)
    ]
    return (
        f"{_timing(latencies)}, recall@10 {statistics.mean(recalls):.3f}, "
        f"recall@10 against the unbounded full text {statistics.mean(against_unbounded):.3f}, "
        f"searches with fewer than min(10, rows) hits: {short}"
    )


def measure_full_text(owner_ids: list[int], args: argparse.Namespace) -> str:
    from apps.memory.search_selectors import memory_search

    latencies, unbounded, short, against_unbounded = [], [], 0, []
    for owner, _, words in _queries(owner_ids, args, 1):
        started = time.perf_counter()
        hits = memory_search(user_id=owner, text=" ".join(words), vector=None, limit=10)
        latencies.append((time.perf_counter() - started) * 1000)
        short += len(hits) < min(10, visible_rows(owner))
        started = time.perf_counter()
        top = unbounded_top(owner, " ".join(words), None)
        unbounded.append((time.perf_counter() - started) * 1000)
        against_unbounded.append(_overlap(hits, top))
    return (
        f"{_timing(latencies)}, recall@10 against the unbounded full text "
        f"{statistics.mean(against_unbounded):.3f} (unbounded: {_timing(unbounded)}), "
        f"searches with fewer than min(10, rows) hits: {short}"
    )


def measure_graph(owner_ids: list[int], args: argparse.Namespace, *, changed: bool) -> str:
    """The turn's graph read: read whole (`changed`: the graph moved since this process last
    read it), or only its versions checked (unchanged since the last read)."""
    from apps.memory.selectors import forget_known_graphs, plan_and_knowledge

    latencies, counts = [], []
    for owner, _, _ in _queries(owner_ids, args, 2):
        if changed:
            forget_known_graphs()
        else:
            plan_and_knowledge(user_id=owner, conversation_id=None)
        started = time.perf_counter()
        _, triples = plan_and_knowledge(user_id=owner, conversation_id=None)
        latencies.append((time.perf_counter() - started) * 1000)
        counts.append(len(triples))
    return f"{_timing(latencies)}, triples each {min(counts)}–{max(counts)}"


def measure_episodes(owner_ids: list[int], args: argparse.Namespace) -> str:
    from apps.memory.episode_selectors import episode_search
    from apps.memory.search_selectors import EPISODES_PER_TURN

    latencies, counts = [], []
    for owner, vector, words in _queries(owner_ids, args, 3):
        started = time.perf_counter()
        hits = episode_search(
            user_id=owner, text=" ".join(words), vector=vector, limit=EPISODES_PER_TURN
        )
        latencies.append((time.perf_counter() - started) * 1000)
        counts.append(len(hits))
    return f"{_timing(latencies)}, episodes each {min(counts)}–{max(counts)}"


def _warm_up_turns(owner_ids: list[int], args: argparse.Namespace):
    """One untimed turn per user, before the timed ones: a server that has answered each user once.

    The recall's pool threads open their database connections on their first turns (a few ms
    each), and a user's first turn after the data was loaded reads their index pages from disk.
    """
    rng = random.Random(args.seed + 5)
    words = vocabulary(args.words)
    for owner in owner_ids:
        yield owner, random_unit_vector(rng, args.dim), rng.sample(words, 3)


def measure_turn(owner_ids: list[int], args: argparse.Namespace, *, graph_changed: bool) -> str:
    """The whole memory context of a turn, its message's vector made beforehand; with
    `graph_changed`, every timed turn reads its user's graph whole (the first turn after a
    reflection wrote a fact), else only the graph's versions (nothing wrote one since)."""
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from apps.accounts.selectors import user_knowledge_language
    from apps.cognition.context import memory_context_for_turn
    from apps.core.selectors import runtime_config
    from apps.memory.selectors import default_plan_steps, forget_known_graphs
    from llm_stub import StubServer

    users = {user.pk: user for user in get_user_model().objects.filter(pk__in=owner_ids)}
    config = runtime_config()
    latencies, routes = [], {}
    with StubServer(port=0, dim=args.dim) as stub:
        settings.THALAMUS_LLM_BASE_URL = stub.url
        warm_up = list(_warm_up_turns(owner_ids, args))
        for turn, (owner, vector, words) in enumerate(warm_up + list(_queries(owner_ids, args, 4))):
            text = "Tell me about " + " and ".join(words)
            query = default_plan_steps(text, config.max_memory_results)[0].search_text
            embedded = Future()
            embedded.set_result(({query: vector}, ""))
            # The turn reads the language with its template, before the recall (turn_memory).
            language = user_knowledge_language(user=users[owner], config=config)
            if graph_changed:
                forget_known_graphs()
            started = time.perf_counter()
            context = memory_context_for_turn(
                user=users[owner],
                conversation=None,
                text=text,
                config=config,
                embedded=embedded,
                language=language,
            )
            assert context.trace["vector_search"], context.trace.get("embedding_error")
            if turn >= len(warm_up):
                latencies.append((time.perf_counter() - started) * 1000)
                routes[context.trace["route"]] = routes.get(context.trace["route"], 0) + 1
    return f"{_timing(latencies)}, routes {routes}"


def sizes() -> list[tuple[str, int]]:
    from django.db import connection

    names = ["memnode_embedding_hnsw", *RECALL_INDEXES["memorynode"], *RECALL_INDEXES["triple"]]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'memory_memorynode (table)', pg_table_size('memory_memorynode') "
            "UNION ALL SELECT indexname, pg_relation_size(indexname::regclass) FROM pg_indexes "
            " WHERE indexname = ANY(%s)",
            [names],
        )
        return cursor.fetchall()


def main() -> None:
    args = parse_args()
    setup_django(args.dim)
    from apps.core import embedded

    try:
        figures = load(args)
        from django.contrib.auth import get_user_model
        from django.db import connection

        from apps.memory.search_selectors import EXACT_SCAN_MAX_ROWS

        owner_ids = list(get_user_model().objects.values_list("pk", flat=True))
        with connection.cursor() as cursor:
            cursor.execute("SHOW shared_buffers")
            (shared_buffers,) = cursor.fetchone()
        print(
            f"\n{args.nodes} nodes, {args.users} users (~{args.nodes // args.users} each), "
            f"{args.words}-word vocabulary, {args.dim} dimensions, {args.queries} queries a line; "
            f"load average {os.getloadavg()[0]:.1f}, cpu_reference_ms {cpu_reference_ms():.0f}, "
            f"shared_buffers {shared_buffers}"
        )
        searched = measure_search(owner_ids, args, EXACT_SCAN_MAX_ROWS)
        print(f"memory_search, as the turn runs it:  {searched}")
        if args.hnsw:
            print(f"memory_search, forced through HNSW:  {measure_search(owner_ids, args, 0)}")
        print(f"full-text branch (no vector):        {measure_full_text(owner_ids, args)}")
        graph = measure_graph(owner_ids, args, changed=True)
        print(f"graph, read whole:                   {graph}")
        graph = measure_graph(owner_ids, args, changed=False)
        print(f"graph, unchanged (versions only):    {graph}")
        print(f"episodes (episode_search):           {measure_episodes(owner_ids, args)}")
        turn = measure_turn(owner_ids, args, graph_changed=False)
        print(f"memory_context_for_turn, no embed:   {turn}")
        turn = measure_turn(owner_ids, args, graph_changed=True)
        print(f"  the same, each graph read whole:   {turn}")
        print(f"load average now {os.getloadavg()[0]:.1f}")
        for name, seconds in figures.items():
            print(f"build: {name}: {seconds:.1f} s")
        for name, size in sizes():
            print(f"size: {name}: {size / 2**20:.0f} MB")
    finally:
        from thalamus_site.celery import app

        app.control.purge()
        os.environ.pop("DATABASE_URL", None)
        embedded.release()


if __name__ == "__main__":
    sys.exit(main())
