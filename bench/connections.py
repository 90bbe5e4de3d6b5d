"""Database connections with several web processes and workers under load.

    .venv/bin/python -m bench.connections [--web-processes 4] [--workers 4] [--users 50]
                                          [--seconds 60]

`manage.py up --web-processes N` (its main worker, its LLM worker and beat) plus more Celery
workers of `up`'s concurrency (2) on both queues, until there are --workers of them, all on the
embedded PostgreSQL and Redis, against the LLM stub in a process of its own (50 ms to the first
token, 400 tokens a second, 40-token answers; the background calls get the stub's own JSON).
--users websocket users chat through the one port for --seconds (think 0.5 s); meanwhile
pg_stat_activity is sampled every 0.2 s. Reported: the most client connections PostgreSQL held
at once (this script's own sampling connection excluded) against its max_connections, turns,
errors and the added time to first token.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench._harness import (
    ROOT,
    cpu_reference_ms,
    free_port,
    stop_up,
    summary,
    up_env,
    wait_for_page,
)
from bench.load import _user as load_user
from bench.turn_overhead import STUB_TPS, STUB_TTFT, _setup_users
from llm_stub import StubServer

REPLY_TOKENS = 40


def _serve_stub(control) -> None:
    reply = " ".join(["word"] * REPLY_TOKENS)
    with StubServer(port=0) as stub:
        stub.set_defaults(ttft=STUB_TTFT, tps=STUB_TPS)
        for _ in range(50_000):
            stub.script(
                {"content": reply, "ttft": STUB_TTFT, "tps": STUB_TPS, "match": "You are Thalamus"}
            )
        control.send(stub.url)
        control.recv()


def _sample(database_url: str, stop: threading.Event, peaks: dict) -> None:
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as connection:
        peaks["max_connections"] = int(connection.execute("SHOW max_connections").fetchone()[0])
        while not stop.wait(0.2):
            total, active = connection.execute(
                "SELECT count(*), count(*) FILTER (WHERE state = 'active') FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            ).fetchone()
            peaks["total"] = max(peaks.get("total", 0), total)
            peaks["active"] = max(peaks.get("active", 0), active)
            peaks.setdefault("series", []).append(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--web-processes", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    print(f"cpu_reference_ms {cpu_reference_ms():.0f}")
    context = multiprocessing.get_context("spawn")
    control, stub_end = context.Pipe()
    stub = context.Process(target=_serve_stub, args=(stub_end,), daemon=True)
    stub.start()
    stub_url = control.recv()
    with tempfile.TemporaryDirectory(prefix="thalamus-connections-") as tmp:
        data_dir = Path(tmp) / "data"
        port = free_port()
        env = up_env(data_dir, THALAMUS_LLM_BASE_URL=stub_url)
        up = subprocess.Popen(
            [sys.executable, "manage.py", "up", "--port", str(port)]
            + ["--web-processes", str(args.web_processes)],
            cwd=ROOT,
            env=env,
            stdout=(Path(tmp) / "up.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        extra = []
        try:
            wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", up)
            users = _setup_users(data_dir, args.users)
            from django.conf import settings
            from django.db import connection

            connection.close()  # this script's own: not counted

            db = settings.DATABASES["default"]
            queues = f"{settings.CELERY_TASK_DEFAULT_QUEUE},{settings.THALAMUS_BACKGROUND_QUEUE}"
            # `up` runs two workers (the main queue's and the LLM queue's); the rest are extra.
            for _ in range(max(0, args.workers - 2)):
                extra.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "celery", "-A", "thalamus_site", "worker"]
                        + ["--queues", queues, "--concurrency", "2", "--loglevel", "WARNING"],
                        cwd=ROOT,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            url = f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}&port={db['PORT']}"
            peaks: dict = {}
            stop = threading.Event()
            sampler = threading.Thread(target=_sample, args=(url, stop, peaks), daemon=True)
            sampler.start()
            time.sleep(5)  # the extra workers start
            until = time.monotonic() + args.seconds
            results = asyncio.run(_all(port, users, until))
            time.sleep(3)
            stop.set()
            sampler.join(5)
            added = [value for user_added, _ in results for value in user_added]
            errors = [error for _, user_errors in results for error in user_errors]
            print(
                f"{args.web_processes} web processes, {args.workers} workers (concurrency 2),"
                f" {args.users} users for {args.seconds:g} s"
            )
            print(f"turns {len(added)}, errors {len(errors)}")
            for error in errors[:5]:
                print(f"  error: {error}")
            if added:
                print(f"added time to first token: {summary(added)}")
            print(
                f"PostgreSQL client connections: peak {peaks.get('total')} "
                f"(peak active {peaks.get('active')}) of max_connections "
                f"{peaks.get('max_connections')}"
            )
        finally:
            for process in extra:
                process.terminate()
            for process in extra:
                process.wait(30)
            stop_up(up)
            control.send("stop")
            stub.join(10)


async def _all(port: int, users: list, until: float) -> list:
    """Each user chats as in bench.load (0.5 s between turns): its added TTFTs and errors."""
    results = await asyncio.gather(*(load_user(port, *user, until, 0.5) for user in users))
    return [
        ([(first - sent - STUB_TTFT) * 1000 for sent, first, *_ in timings], errors)
        for timings, errors in results
    ]


if __name__ == "__main__":
    main()
