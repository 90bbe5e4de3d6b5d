"""Private embedded PostgreSQL and Redis, and real worker and web processes using them.

The embedded servers of a test run are shared by every pytest process on the machine (see
tests/_environment.py): restarting one, or letting a broker redeliver every unacked task in it,
would break the tests of the others. A test that restarts a server, or kills a whole worker,
starts its own servers in its temporary directory and points its child processes at them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from apps.core.embedded import PG_DATABASE, PG_PORT, PG_SUPERUSER, EmbeddedPostgres, EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent


def redis_url(server: EmbeddedRedis) -> str:
    return f"unix://{server.socket_path}?db=0"


def database_url(server: EmbeddedPostgres | None = None) -> str:
    """The private server's copy of the test database, or the test database itself."""
    if server is not None:
        return f"postgresql://{PG_SUPERUSER}@/{PG_DATABASE}?host={server.socket_dir}&port={PG_PORT}"
    db = settings.DATABASES["default"]
    return f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}&port={db['PORT']}"


@contextmanager
def private_redis(path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def private_postgres(path: Path) -> Iterator[EmbeddedPostgres]:
    """A private PostgreSQL holding a copy of the test database as it is now (schema and rows)."""
    server = EmbeddedPostgres(path)
    server.start()
    try:
        db = settings.DATABASES["default"]
        dump = subprocess.run(
            [str(server.bin_dir / "pg_dump"), "--no-owner", "-h", db["HOST"], "-p", db["PORT"]]
            + ["-U", db["USER"], db["NAME"]],
            capture_output=True,
            check=True,
        )
        subprocess.run(
            [str(server.bin_dir / "psql"), "-q", "-v", "ON_ERROR_STOP=1"]
            + ["-h", str(server.socket_dir), "-p", str(PG_PORT), "-U", PG_SUPERUSER, PG_DATABASE],
            input=dump.stdout,
            capture_output=True,
            check=True,
        )
        yield server
    finally:
        server.stop()


def start_worker(
    *,
    redis: str,
    database: str | None = None,
    concurrency: int = 1,
    visibility_timeout: int | None = None,
) -> subprocess.Popen:
    """A real Celery worker process (prefork) on this test process's queues, in its own process
    group. `visibility_timeout` shortens the time after which the broker hands a dead worker's
    unacked tasks to another (900 s in production)."""
    env = {**os.environ, "DATABASE_URL": database or database_url(), "REDIS_URL": redis}
    options = (
        f"app.conf.broker_transport_options = {{'visibility_timeout': {visibility_timeout}}}; "
        if visibility_timeout
        else ""
    )
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from thalamus_site.celery import app; "
            f"{options}app.worker_main(sys.argv[1:])",
            "worker",
            "--pool=prefork",
            f"--concurrency={concurrency}",
            # Reflection runs on the background LLM queue.
            f"--queues={settings.CELERY_TASK_DEFAULT_QUEUE},{settings.THALAMUS_BACKGROUND_QUEUE}",
            "--without-gossip",
            "--without-mingle",
            "--loglevel=warning",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )


def pool_children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
