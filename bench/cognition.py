"""Background cognition at scale: a promotion pass, a decay pass, reflection throughput.

    .venv/bin/python -m bench.cognition [--nodes 1000000] [--users 1000] [--dim 384] [--hnsw]

Runs on its own database (`thalamus_bench_cognition`) in the embedded PostgreSQL. Loads the
volatile nodes (plus a long-term set per user and the critiques behind their confidence) with
set-based SQL and no secondary index, then builds the indexes the migrations define — the HNSW
index only with `--hnsw`, because on 2 cores it takes longer than the rest of the run at 1M.
It times the real services: `memories_promote_and_link` with the runtime configuration's batch
and with a batch that takes every candidate, `memories_decay`, each committed (event pushes
included) and the nodes restored and vacuumed between runs; then a real Celery worker process
reflecting on completed replies against the zero-latency LLM stub. The data is kept between
runs of the same shape.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import time

from bench._harness import ROOT, create_database
from bench.retrieval import VOCABULARY, percentile, timed

BENCH_DATABASE = "thalamus_bench_cognition"
INSTANCE = "bench-cognition"
SNAPSHOT_COLUMNS = ("state", "confidence_score", "last_accessed_at", "valid_to", "superseded_by_id")
NODE_COLUMNS = (
    "id, owner_id, description, kind, topic, fact_key, state, confidence_score, importance, "
    "origin_context, source_message_id, embedding, embedding_status, embedding_model, "
    "created_at, last_accessed_at, valid_to, superseded_by_id"
)
CRITIQUE_COLUMNS = (
    "id, node_id, owner_id, message_id, verdict, debate, delta, model, contradicts, supports, "
    "created_at"
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000_000, help="volatile nodes")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--long-term", type=int, default=100, help="promoted nodes per user")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--hnsw", action="store_true", help="also build the HNSW index")
    parser.add_argument("--runs", type=int, default=5, help="runs of each cheap pass")
    parser.add_argument("--replies", type=int, default=300, help="replies to reflect on")
    parser.add_argument(
        "--max-pass", type=float, default=300, help="skip a pass estimated to take longer (s)"
    )
    return parser.parse_args()


def setup_django(dim: int) -> None:
    """Start the embedded servers, then point Django at the benchmark's own database."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")
    os.environ["THALAMUS_EMBED_DIM"] = str(dim)
    os.environ["THALAMUS_EMBEDDER"] = "openai"
    # Its own queue, cache keys and channel groups: nothing reaches the developer's worker.
    os.environ["THALAMUS_INSTANCE"] = INSTANCE
    from apps.core import embedded

    if os.environ.get("DATABASE_URL"):
        # It truncates tables: never point it at a database that may hold real memories.
        sys.exit("bench.cognition runs on the embedded PostgreSQL only; unset DATABASE_URL.")
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


def _sql(statement: str, params=None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def _marker(args: argparse.Namespace) -> str:
    return f"bench:{args.nodes}:{args.users}:{args.long_term}:{args.dim}"


def _has_hnsw() -> bool:
    return bool(_sql("SELECT 1 FROM pg_indexes WHERE indexname = 'memnode_embedding_hnsw'"))


def load(args: argparse.Namespace) -> dict[str, float]:
    """Bulk-load users, long-term and volatile nodes and critiques; build the indexes."""
    marker = _marker(args)
    if _sql("SELECT to_regclass('bench_snapshot')")[0][0]:
        restore()
        found = _sql(
            "SELECT count(*) FILTER (WHERE state = 'volatile'), max(embedding_model) "
            "FROM memory_memorynode"
        )[0]
        if found == (args.nodes, marker):
            print(f"Reusing {args.nodes} volatile nodes over {args.users} users ({args.dim} d).")
            figures = {}
            if args.hnsw and not _has_hnsw():
                figures["hnsw_s"] = _build_hnsw()
            elif not args.hnsw and _has_hnsw():
                _sql("DROP INDEX memnode_embedding_hnsw")
            return figures
    figures: dict[str, float] = {}
    _sql("DROP TABLE IF EXISTS bench_snapshot, bench_gone_nodes, bench_gone_critiques")
    _sql(
        "TRUNCATE memory_memorynode, memory_critique, memory_memorylink, core_event, "
        "chat_conversation, auth_user CASCADE"
    )
    indexes = _sql(
        "SELECT indexname, indexdef FROM pg_indexes "
        "WHERE tablename = 'memory_memorynode' AND indexname <> 'memory_memorynode_pkey'"
    )
    for name, _ in indexes:
        _sql(f"DROP INDEX {name}")
    _sql(f"ALTER TABLE memory_memorynode ALTER COLUMN embedding TYPE vector({args.dim})")
    with timed(f"Loading {args.users} users and {args.users * args.long_term} long-term nodes"):
        _insert_users_and_long_term(args, marker)
    with timed(f"Loading {args.nodes} volatile nodes") as timer:
        _insert_volatile(args, marker)
    figures["load_s"] = timer.seconds
    with timed("Loading the critiques behind their confidence") as timer:
        _insert_critiques()
    figures["critiques_s"] = timer.seconds
    with timed("Building the B-tree and GIN indexes the migrations define") as timer:
        _sql("SET maintenance_work_mem = '1GB'")
        for name, definition in indexes:
            if name != "memnode_embedding_hnsw":
                _sql(definition)
    figures["indexes_s"] = timer.seconds
    if args.hnsw:
        figures["hnsw_s"] = _build_hnsw()
    with timed("VACUUM ANALYZE and snapshots for restoring between runs"):
        _sql("VACUUM ANALYZE memory_memorynode")
        _sql("VACUUM ANALYZE memory_critique")
        _snapshot()
    return figures


def _build_hnsw() -> float:
    with timed("Building the HNSW index (m=16, ef_construction=64)") as timer:
        _sql("SET maintenance_work_mem = '2GB'")
        _sql(
            "CREATE INDEX memnode_embedding_hnsw ON memory_memorynode "
            "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
    return timer.seconds


def _insert_users_and_long_term(args: argparse.Namespace, marker: str) -> None:
    _sql(
        """
        INSERT INTO auth_user (password, is_superuser, username, first_name, last_name,
                               email, is_staff, is_active, date_joined)
        SELECT '!', false, 'bench' || g, '', '', '', false, true, now()
          FROM generate_series(1, %s) AS g
        """,
        [args.users],
    )
    # Owner-major order: long-term row k belongs to user k / long_term (ids are consecutive).
    _sql(
        f"""
        INSERT INTO memory_memorynode
            (owner_id, description, kind, topic, fact_key, state, confidence_score, importance,
             origin_context, embedding, embedding_status, embedding_model, created_at,
             last_accessed_at)
        SELECT owners.ids[1 + g / %(per_user)s], {_words_sql("g")}, 'fact',
               (%(words)s::text[])[1 + g %% %(vocab)s], '', 'promoted',
               3 + floor(random() * 4)::int, random(), '',
               l2_normalize({_noise_sql("g", args.dim, 1.0)}), 'ready', %(marker)s,
               now() - interval '30 days' - random() * interval '300 days',
               now() - random() * interval '30 days'
          FROM generate_series(0, %(count)s - 1) AS g,
               (SELECT array_agg(id ORDER BY id) AS ids FROM auth_user) AS owners
         ORDER BY g
        """,
        {
            "per_user": args.long_term,
            "count": args.users * args.long_term,
            "words": VOCABULARY,
            "vocab": len(VOCABULARY),
            "marker": marker,
        },
    )


def _words_sql(row: str) -> str:
    return (
        "(SELECT string_agg((%(words)s::text[])[1 + floor(random() * %(vocab)s)::int], ' ')"
        f" FROM generate_series(1, 6) WHERE {row} >= 0)"
    )


def _noise_sql(row: str, dim: int, norm: float) -> str:
    """A random vector of about `norm` length (uniform components: variance 1/12 each)."""
    scale = norm * (12 / dim) ** 0.5
    return (
        f"(SELECT array_agg((random() - 0.5) * {scale})::vector({dim})"
        f" FROM generate_series(1, {dim}) WHERE {row} >= 0)"
    )


def _insert_volatile(args: argparse.Namespace, marker: str) -> None:
    """Volatile nodes spread round-robin over users, with realistic score and age spreads.

    One in 20 restates one of its owner's long-term nodes (cosine ≈ 0.96: a near-duplicate
    that merges), three in 20 are about one (≈ 0.71: a link), the rest are unrelated. The
    long-term node a row is about is kept in `origin_context` for the critiques.
    """
    _sql(
        f"""
        INSERT INTO memory_memorynode
            (owner_id, description, kind, topic, fact_key, state, confidence_score, importance,
             origin_context, embedding, embedding_status, embedding_model, created_at,
             last_accessed_at)
        SELECT owners.ids[1 + g %% %(users)s], {_words_sql("g")},
               (ARRAY['fact', 'fact', 'fact', 'preference', 'persona'])[1 + g %% 5],
               (%(words)s::text[])[1 + (g / 7) %% %(vocab)s], '', 'volatile',
               CASE WHEN v.score < 0.03 THEN -1 WHEN v.score < 0.12 THEN 0
                    WHEN v.score < 0.72 THEN 1 WHEN v.score < 0.95 THEN 2
                    WHEN v.score < 0.99 THEN 3 ELSE 4 END,
               random(),
               CASE WHEN near.id IS NULL THEN '' ELSE 'about:' || near.id END,
               l2_normalize(CASE
                   WHEN v.kinship = 0 THEN near.embedding + {_noise_sql("g", args.dim, 0.3)}
                   WHEN v.kinship <= 3 THEN near.embedding + {_noise_sql("g", args.dim, 1.0)}
                   ELSE {_noise_sql("g", args.dim, 1.0)} END),
               'ready', %(marker)s, v.created,
               CASE WHEN v.accessed < 0.4 THEN NULL
                    ELSE v.created + v.accessed * (now() - v.created) END
          FROM generate_series(0, %(nodes)s - 1) AS g
         CROSS JOIN LATERAL (
               SELECT random() AS score, random() AS accessed, (g / %(users)s) %% 20 AS kinship,
                      now() - power(random(), 1.5) * interval '30 days' AS created
         ) AS v
          LEFT JOIN memory_memorynode AS near
            ON v.kinship <= 3 AND near.id = %(first_long_term)s
               + (g %% %(users)s) * %(per_user)s + (g / %(users)s / 20) %% %(per_user)s,
               (SELECT array_agg(id ORDER BY id) AS ids FROM auth_user) AS owners
        """,
        {
            "users": args.users,
            "nodes": args.nodes,
            "per_user": args.long_term,
            "first_long_term": _sql("SELECT min(id) FROM memory_memorynode")[0][0],
            "words": VOCABULARY,
            "vocab": len(VOCABULARY),
            "marker": marker,
        },
    )


def _insert_critiques() -> None:
    """One critique per volatile node whose score moved; a third of the confident nodes that
    are about a long-term node found it contradicted, a third found it supported."""
    _sql(
        """
        INSERT INTO memory_critique
            (node_id, owner_id, verdict, debate, delta, model, contradicts, supports, created_at)
        SELECT n.id, n.owner_id,
               CASE WHEN n.confidence_score > 1 THEN 'withstands' ELSE 'fails' END,
               'For: the user said so. Against: nothing else supports it.',
               CASE WHEN n.confidence_score > 1 THEN 1 ELSE -1 END, 'bench',
               CASE WHEN n.confidence_score >= 3 AND about.id IS NOT NULL AND mod(n.id, 3) = 0
                    THEN ARRAY[about.id] ELSE '{}' END,
               CASE WHEN n.confidence_score >= 3 AND about.id IS NOT NULL AND mod(n.id, 3) = 1
                    THEN ARRAY[about.id] ELSE '{}' END,
               n.created_at
          FROM memory_memorynode AS n
         CROSS JOIN LATERAL (
               SELECT nullif(substring(n.origin_context FROM 7), '')::bigint AS id
         ) AS about
         WHERE n.state = 'volatile' AND n.confidence_score <> 1
        """
    )


def _snapshot() -> None:
    """What restore() puts back: every node's mutable columns, and every node decay may take."""
    _sql(
        f"CREATE TABLE bench_snapshot AS SELECT id, {', '.join(SNAPSHOT_COLUMNS)} "
        "FROM memory_memorynode"
    )
    _sql("ALTER TABLE bench_snapshot ADD PRIMARY KEY (id)")
    _sql(
        f"CREATE TABLE bench_gone_nodes AS SELECT {NODE_COLUMNS} FROM memory_memorynode "
        "WHERE state = 'volatile' AND confidence_score < 1"
    )
    _sql(
        f"CREATE TABLE bench_gone_critiques AS SELECT {CRITIQUE_COLUMNS} FROM memory_critique "
        "WHERE node_id IN (SELECT id FROM bench_gone_nodes)"
    )


def restore() -> None:
    """Undo promotion, decay and reflection so every run starts from the loaded state."""
    _sql("TRUNCATE memory_memorylink, core_event")
    # What reflection wrote: its nodes (with their history rows), triples, plans, chats.
    _sql("DELETE FROM memory_memorynode WHERE id > (SELECT max(id) FROM bench_snapshot)")
    _sql("DELETE FROM memory_triple")
    _sql("DELETE FROM memory_retrievalplan")
    _sql("DELETE FROM chat_message")
    _sql("DELETE FROM chat_conversation")
    _sql(
        f"""
        INSERT INTO memory_memorynode ({NODE_COLUMNS})
        SELECT {NODE_COLUMNS} FROM bench_gone_nodes AS g
         WHERE NOT EXISTS (SELECT 1 FROM memory_memorynode AS n WHERE n.id = g.id)
        """
    )
    _sql(
        f"""
        INSERT INTO memory_critique ({CRITIQUE_COLUMNS})
        SELECT {CRITIQUE_COLUMNS} FROM bench_gone_critiques AS g
         WHERE NOT EXISTS (SELECT 1 FROM memory_critique AS c WHERE c.id = g.id)
        """
    )
    _sql(
        f"""
        UPDATE memory_memorynode AS n
           SET {", ".join(f"{name} = s.{name}" for name in SNAPSHOT_COLUMNS)}
          FROM bench_snapshot AS s
         WHERE n.id = s.id AND ({", ".join(f"n.{name}" for name in SNAPSHOT_COLUMNS)})
               IS DISTINCT FROM ({", ".join(f"s.{name}" for name in SNAPSHOT_COLUMNS)})
        """
    )
    _sql("VACUUM ANALYZE memory_memorynode")


def describe() -> dict[str, int]:
    from apps.core.selectors import runtime_config

    config = runtime_config()
    row = _sql(
        """
        SELECT count(*) FILTER (WHERE state = 'volatile'),
               count(*) FILTER (WHERE state = 'promoted'),
               count(*) FILTER (WHERE state = 'volatile' AND confidence_score >= %(threshold)s),
               count(*) FILTER (WHERE state = 'volatile' AND confidence_score < %(minimum)s
                   AND COALESCE(last_accessed_at, created_at)
                       < now() - make_interval(hours => %(hours)s)),
               pg_total_relation_size('memory_memorynode') / 1048576
          FROM memory_memorynode WHERE valid_to IS NULL
        """,
        {
            "threshold": config.promotion_threshold,
            "minimum": config.minimum_score,
            "hours": config.decay_hours,
        },
    )[0]
    return dict(zip(("volatile", "long_term", "candidates", "stale", "size_mb"), row, strict=True))


def time_passes(label: str, runs: int, one_pass, budget: float = 90) -> list[float]:
    """Up to `runs` timed passes from the loaded state; fewer once they have taken `budget` s."""
    seconds: list[float] = []
    for run in range(runs):
        if sum(seconds) > budget:
            break
        restore()
        started = time.perf_counter()
        outcome = one_pass()
        seconds.append(time.perf_counter() - started)
        print(f"  {label}, run {run + 1}: {seconds[-1]:.2f} s ({outcome})", flush=True)
    return seconds


def promotion_pass(batch_size: int):
    from apps.core.selectors import runtime_config
    from apps.memory.consolidation_services import memories_promote_and_link

    def run() -> str:
        config = runtime_config()
        result = memories_promote_and_link(
            threshold=config.promotion_threshold,
            batch_size=batch_size,
            link_similarity=config.link_similarity,
            duplicate_similarity=config.duplicate_similarity,
            neighbours=config.link_neighbours,
        )
        return (
            f"{len(result.promoted)} promoted, {len(result.merged)} merged, "
            f"{len(result.superseded)} superseded, {len(result.links)} links"
        )

    return run


def decay_pass() -> str:
    from apps.core.selectors import runtime_config
    from apps.memory.forget_services import memories_decay

    config = runtime_config()
    counts = memories_decay(decay_hours=config.decay_hours, minimum_score=config.minimum_score)
    return f"{sum(counts.values())} forgotten over {len(counts)} owners"


def reflection_throughput(replies: int, dim: int) -> dict[str, float]:
    """Completed replies enqueued to one real worker process → memories written per second."""
    from django.contrib.auth import get_user_model

    from apps.chat.models import Conversation, Message
    from apps.cognition.tasks import reflect
    from apps.core.models import RuntimeConfig
    from apps.core.services import runtime_config_save
    from apps.memory.models import MemoryNode
    from llm_stub import StubServer
    from thalamus_site.celery import app

    config = RuntimeConfig.objects.order_by("pk").first() or RuntimeConfig()
    # The critic is its own LLM call per turn; this measures reflection alone.
    config.critic_enabled = False
    runtime_config_save(config=config)
    from apps.core.selectors import forget_runtime_config

    forget_runtime_config()
    owners = list(get_user_model().objects.order_by("pk")[:100])
    warm_up = 10
    with StubServer(port=0, dim=dim) as stub:
        for index in range(warm_up + replies):
            stub.script(_reflection_reply(index))
        worker = _start_worker(stub.url)
        try:
            _wait_for_worker(app, worker)
            batches = []
            for first, size in ((0, warm_up), (warm_up, replies)):
                ids = _completed_replies(owners, size, Conversation, Message, first=first)
                started = time.perf_counter()
                for message_id in ids:
                    reflect.delay(message_id)
                while Message.objects.filter(id__in=ids, trace__has_key="reflection").count() < len(
                    ids
                ):
                    if worker.poll() is not None:
                        raise RuntimeError(f"the worker exited with {worker.returncode}")
                    time.sleep(0.02)
                batches.append((ids, time.perf_counter() - started))
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
            app.control.purge()
    ids, seconds = batches[-1]
    memories = MemoryNode.objects.filter(source_message_id__in=ids).count()
    return {"replies": len(ids), "memories": memories, "seconds": seconds}


def _said(index: int) -> list[str]:
    """What the user of turn `index` states: three things in unrelated words, so no memory is
    a near-duplicate of another that merges."""
    rng = random.Random(index)
    return [f"I keep {' '.join(rng.sample(VOCABULARY, 4))}" for _ in range(3)]


def _reflection_reply(index: int) -> dict:
    """What a model returns for a turn that taught three new things (two quotes: a small
    model's run-on quote of two sentences counts for both)."""
    first, second, third = _said(index)
    return {"json": {"message_1": [f"{first}. {second}", third]}, "match": f"turn {index}."}


def _completed_replies(
    owners, count: int, conversation_model, message_model, *, first: int = 0
) -> list[int]:
    conversations = conversation_model.objects.bulk_create(
        [conversation_model(owner=owners[index % len(owners)]) for index in range(count)]
    )
    questions = message_model.objects.bulk_create(
        [
            message_model(
                conversation=conversation,
                role="user",
                content=". ".join(_said(first + index)) + f". That was turn {first + index}.",
            )
            for index, conversation in enumerate(conversations)
        ]
    )
    replies = message_model.objects.bulk_create(
        [
            message_model(
                conversation=question.conversation,
                role="assistant",
                content="Pasta it is.",
                status="complete",
                reply_to=question,
            )
            for question in questions
        ]
    )
    return [reply.pk for reply in replies]


def _start_worker(llm_url: str) -> subprocess.Popen:
    env = {**os.environ, "THALAMUS_LLM_BASE_URL": llm_url}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "thalamus_site",
            "worker",
            "--concurrency",
            "1",
            "--hostname",
            f"{INSTANCE}@%h",
            "--loglevel",
            "WARNING",
        ],
        cwd=ROOT,
        env=env,
    )


def _wait_for_worker(app, worker: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise RuntimeError(f"the worker exited with {worker.returncode}")
        replies = app.control.ping(timeout=0.5) or []
        if any(name.startswith(f"{INSTANCE}@") for reply in replies for name in reply):
            return
    raise TimeoutError("the Celery worker did not answer a ping")


def _figure(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):.2f} s, p95 {percentile(values, 0.95):.2f} s "
        f"(n={len(values)}, max {max(values):.2f} s)"
    )


def main() -> None:
    args = parse_args()
    setup_django(args.dim)
    from apps.core import embedded

    try:
        started = time.perf_counter()
        figures = load(args)
        from apps.core.selectors import runtime_config

        config = runtime_config()
        shape = describe()
        print(
            f"\n{shape['volatile']} volatile and {shape['long_term']} long-term nodes over "
            f"{args.users} users, {args.dim} dimensions, {shape['size_mb']} MB with indexes, "
            f"HNSW {'built' if _has_hnsw() else 'not built'}.\n"
            f"Candidates (confidence >= {config.promotion_threshold}): {shape['candidates']} "
            f"({shape['candidates'] / shape['volatile']:.1%} of volatile nodes); stale "
            f"(confidence < {config.minimum_score}, untouched for {config.decay_hours} h): "
            f"{shape['stale']} ({shape['stale'] / shape['volatile']:.1%})."
        )
        results = {}
        # A short pass first: it tells whether the real batches can finish in reasonable time.
        probe = time_passes("promotion, batch 10 (probe)", 1, promotion_pass(10))
        per_candidate = probe[0] / 10
        skipped = []
        configured, every = config.batch_size, shape["candidates"]
        for label, batch_size, runs in (
            (f"promotion, batch {configured} (runtime config)", configured, args.runs),
            (f"promotion, batch {every} (every candidate)", every, 3),
        ):
            if per_candidate * batch_size < args.max_pass:
                results[label] = time_passes(label, runs, promotion_pass(batch_size))
                per_candidate = statistics.median(results[label]) / batch_size
            else:
                skipped.append(
                    f"{label}: not run, about {per_candidate * batch_size:.0f} s "
                    f"at {per_candidate * 1000:.0f} ms per candidate"
                )
                print(f"  {skipped[-1]}")
        results["decay"] = time_passes("decay", 3, decay_pass)
        restore()
        reflection = reflection_throughput(args.replies, args.dim)
        restore()
        print()
        for name, seconds in figures.items():
            print(f"{name}: {seconds:.1f} s")
        for label, seconds in results.items():
            print(f"{label}: {_figure(seconds)}")
        print("\n".join(skipped))
        print(
            f"reflection, one worker: {reflection['replies']} replies, "
            f"{reflection['memories']} memories in {reflection['seconds']:.1f} s = "
            f"{reflection['memories'] / reflection['seconds']:.1f} memories/s, "
            f"{reflection['replies'] / reflection['seconds']:.1f} replies/s"
        )
        print(f"total {time.perf_counter() - started:.0f} s")
    finally:
        os.environ.pop("DATABASE_URL", None)
        embedded.release()


if __name__ == "__main__":
    sys.exit(main())
