"""Private embedded PostgreSQL and Redis, and real worker and web processes using them.

The embedded servers of a test run are shared by every pytest process on the machine (see
tests/_environment.py): restarting one, or letting a broker redeliver every unacked task in it,
would break the tests of the others. A test that restarts a server, or kills a whole worker,
starts its own servers in its temporary directory and points its child processes at them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import httpx
from django.conf import settings

from apps.core.embedded import PG_DATABASE, PG_PORT, PG_SUPERUSER, EmbeddedPostgres, EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent
Server = TypeVar("Server", EmbeddedPostgres, EmbeddedRedis)


def redis_url(server: EmbeddedRedis) -> str:
    return f"unix://{server.socket_path}?db=0"


def database_url(server: EmbeddedPostgres | None = None) -> str:
    """The private server's copy of the test database, or the test database itself."""
    if server is not None:
        return f"postgresql://{PG_SUPERUSER}@/{PG_DATABASE}?host={server.socket_dir}&port={PG_PORT}"
    db = settings.DATABASES["default"]
    return f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}&port={db['PORT']}"


def wait_for_http(url: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    """Until `url` answers at all (any status); an error if `process` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before serving {url}")
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing served {url} within {timeout} s")


# The monitor token of the web servers tests start, to read their warm-up at /healthz.
HEALTH_TOKEN = "test-servers-monitor"


def wait_until_warm(url: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    """Until the web server at `url` has run its warm-up (apps/core/warmup.py), whose last step
    sends the answers' shared start to the LLM: started while a test runs, that request could
    take the reply the test scripted for its own, and count in what it measures."""
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} while warming up")
        report = httpx.get(
            f"{url}/healthz", headers={"Authorization": f"Bearer {HEALTH_TOKEN}"}, timeout=10
        ).json()
        if report.get("warm", {}).get("state") != "warming":  # no warm-up, done or failed
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} still warming up after {timeout} s: {report['warm']}")
        time.sleep(0.1)


@contextmanager
def _data_dir() -> Iterator[Path]:
    # Not pytest's tmp_path: another pytest run on the machine resets the permissions of its
    # root to 0700, which locks out PostgreSQL's own OS user (embedded.PG_OS_USER) mid-test.
    path = Path(tempfile.mkdtemp(prefix="thalamus-private-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def private_redis() -> Iterator[EmbeddedRedis]:
    with _data_dir() as path, _running(EmbeddedRedis(path)) as server:
        yield server


@contextmanager
def empty_postgres() -> Iterator[EmbeddedPostgres]:
    """A private PostgreSQL of its own, with nothing in it but the empty Thalamus database."""
    with _data_dir() as path, _running(EmbeddedPostgres(path)) as server:
        yield server


@contextmanager
def private_postgres() -> Iterator[EmbeddedPostgres]:
    """A private PostgreSQL holding a copy of the test database as it is now (schema and rows)."""
    with _data_dir() as path, _running(EmbeddedPostgres(path)) as server:
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


@contextmanager
def _running(server: Server) -> Iterator[Server]:
    server.start()
    try:
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
    unacked tasks to another (900 s in production); the worker then also looks for them every
    second, where kombu's Redis transport looks every 10 s and scans on every tenth look, so
    they came back up to 100 s after their timeout (the killed-worker test took 110 s)."""
    env = {**os.environ, "DATABASE_URL": database or database_url(), "REDIS_URL": redis}
    options = (
        "app.conf.broker_transport_options = {"
        f"'visibility_timeout': {visibility_timeout}, "
        "'unacked_restore_interval': 1, 'unacked_restore_throttle': 1}; "
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


@contextmanager
def worker_process(*, redis: str, database: str | None = None) -> Iterator[subprocess.Popen]:
    """`start_worker` for the length of a block, then stopped as `up` stops it (SIGTERM)."""
    worker = start_worker(redis=redis, database=database)
    try:
        yield worker
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(15)


def pool_children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@contextmanager
def web_server(*, database: str | None = None, redis: str) -> Iterator[str]:
    """The real ASGI app under uvicorn in a child process; yields its base URL."""
    from apps.core.ports import free_port

    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database or database_url(),
        "REDIS_URL": redis,
        "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "thalamus_site.asgi:application"]
        + ["--host", "127.0.0.1", "--port", str(port), "--lifespan", "off"]
        + ["--log-level", "warning"],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/accounts/login/", 30, process)
        yield url
    finally:
        process.terminate()
        process.wait(10)


# How long a test client keeps an idle connection: less than uvicorn's 5 s (timeout_keep_alive).
# At 5 s each, a request sent on a connection as the server closed it failed with "Server
# disconnected without sending a response" (a restart of the database under the site takes
# about that long).
KEEP_ALIVE_SECONDS = 2.0


def logged_in_client(url: str, username: str, password: str) -> httpx.Client:
    client = httpx.Client(
        base_url=url, timeout=15, limits=httpx.Limits(keepalive_expiry=KEEP_ALIVE_SECONDS)
    )
    client.get("/accounts/login/")
    response = client.post(
        "/accounts/login/",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        },
        headers={"Referer": f"{url}/accounts/login/"},
    )
    assert response.status_code == 302, response.text[:500]
    return client


def chat_turn(url: str, client: httpx.Client, conversation_id: int, text: str) -> str:
    """One message over the chat websocket as `client`'s user; the reply's final fragment, or
    the notice refusing the message."""
    from websockets.sync.client import connect

    socket_url = url.replace("http://", "ws://") + f"/ws/c/{conversation_id}/"
    cookie = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
    with connect(
        socket_url, additional_headers={"Cookie": cookie, "Origin": url}, open_timeout=10
    ) as socket:
        socket.send(json.dumps({"content": text}))
        deadline = time.monotonic() + 20
        while True:
            frame = socket.recv(timeout=max(0.1, deadline - time.monotonic()))
            if "msg-assistant complete" in frame or "msg-assistant failed" in frame:
                return frame
            if frame.startswith('<div id="chat-notice"'):
                return frame
