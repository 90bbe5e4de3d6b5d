"""`manage.py up`: the whole of Thalamus in the foreground, on embedded defaults.

Starts the embedded PostgreSQL and Redis when DATABASE_URL / REDIS_URL are unset, migrates,
creates the first admin, then runs the ASGI server, the Celery workers and Celery beat as child
processes with their logs interleaved. The web server imports the app while the database is
migrated and serves as soon as it is; the workers and beat start once it serves, at a lower CPU
priority, so that on two cores the web's start does not share them with three more imports.
Ctrl-C or SIGTERM stops them all and the embedded servers. If a child dies, `up` says which and
why, stops everything else and exits non-zero.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError, connection

from apps.core import embedded

STOP_GRACE_SECONDS = 15


# The stub's first log line: "… listening on http://127.0.0.1:PORT/v1 (models=…)".
STUB_LISTENING = re.compile(r"listening on (http://\S+)")


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    tail: deque = field(default_factory=lambda: deque(maxlen=20))


def demo_stub_command() -> list[str]:
    """The demo's LLM stub: it lists the demo model and the embedding model, nothing else, so
    the model picker offers only the model that really answers."""
    from apps.core.demo import DEMO_CHAT_MODEL

    return [
        *(sys.executable, "-m", "llm_stub", "--port", "0", "--demo"),
        *("--model", DEMO_CHAT_MODEL, "--model", settings.THALAMUS_EMBED_MODEL),
    ]


def web_command(host: str, port: int, processes: int = 1, *, after_go: bool = False) -> list[str]:
    """The ASGI server's command line (thalamus_site/serve.py: uvicorn, the app imported once
    and its `processes` forked from it). A websocket frame over THALAMUS_WS_MAX_BYTES closes the
    socket with 1009 before it reaches Thalamus. The processes share the one listening socket;
    the channel layer, the shared cache and the database carry everything between them
    (apps/chat/stops.py: Stop). With `after_go` it binds the port only once it reads a line."""
    return [
        sys.executable,
        "-m",
        "thalamus_site.serve",
        "thalamus_site.asgi:application",
        "--host",
        host,
        "--port",
        str(port),
        "--ws-max-size",
        str(settings.THALAMUS_WS_MAX_BYTES),
        "--workers",
        str(processes),
        *(["--after-go"] if after_go else []),
    ]


class Command(BaseCommand):
    help = "Run Thalamus (database, Redis, web server, worker and beat) in the foreground."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--demo",
            action="store_true",
            help="Also start the built-in demo LLM and point Thalamus at it (no Ollama needed).",
        )
        parser.add_argument(
            "--web-processes",
            type=int,
            default=settings.THALAMUS_WEB_PROCESSES,
            help="ASGI server processes sharing the one port (default THALAMUS_WEB_PROCESSES, "
            "or 2 on a machine of 2 cores or more).",
        )
        parser.add_argument("--worker-concurrency", type=int, default=2)
        parser.add_argument(
            "--background-concurrency",
            type=int,
            default=settings.THALAMUS_BACKGROUND_CONCURRENCY,
            help="Background LLM calls at once (default THALAMUS_BACKGROUND_CONCURRENCY or 1); "
            "a local server with one slot answers one request at a time anyway.",
        )

    def handle(
        self,
        *args,
        host: str,
        port: int,
        demo: bool,
        web_processes: int,
        worker_concurrency: int,
        background_concurrency: int,
        **options,
    ):
        started_at = time.monotonic()
        self._print_lock = threading.Lock()
        self._stopping = threading.Event()
        self.children: list[Child] = []
        if web_processes < 1:
            raise CommandError("--web-processes must be 1 or more.")
        _check_port_free(host, port)
        try:
            embedded.check_data_dir_writable()
        except embedded.EmbeddedError as exc:
            raise CommandError(str(exc)) from None
        acquiring = False
        try:
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, self._on_signal)
            _clear_metrics()
            env = self._child_env(demo)
            # The web imports the app (seconds of CPU) while the servers start and the database
            # is migrated; it binds the port when told "go".
            web = Child("web", web_command(host, port, web_processes, after_go=True))
            self._spawn(web, env, stdin=subprocess.PIPE)
            acquiring = True
            try:
                embedded.acquire()
            except embedded.EmbeddedError as exc:
                raise CommandError(str(exc)) from None
            self._prepare_database(demo)
            with contextlib.suppress(BrokenPipeError):  # a web that died is reported below
                web.process.stdin.write("go\n")
                web.process.stdin.flush()
            if self._wait_until_served(host, port, started_at):
                self._start_background(env, worker_concurrency, background_concurrency)
            failed = self._supervise()
        finally:
            self._stop_children()
            if acquiring:
                embedded.release()
        if failed:
            raise CommandError(failed)
        self._say("up", "stopped cleanly.")

    def _on_signal(self, signum, frame):
        self._stopping.set()

    def _prepare_database(self, demo: bool) -> None:
        try:
            connection.ensure_connection()
        except OperationalError as exc:
            where = settings.DATABASES["default"]
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise CommandError(
                f"Cannot reach the database {where['NAME']!r} at "
                f"{where['HOST'] or 'localhost'}:{where['PORT'] or 5432} ({first_line})."
            ) from None
        call_command("migrate", interactive=False, verbosity=0)
        self._ensure_admin()
        self._load_seed_truths()
        self._set_demo_pace(demo)
        connection.close()

    def _ensure_admin(self) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return
        password = os.environ.get("THALAMUS_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        User.objects.create_superuser("admin", "", password)
        if os.environ.get("THALAMUS_ADMIN_PASSWORD"):
            self._say("up", "created the admin account 'admin' (THALAMUS_ADMIN_PASSWORD).")
        else:
            self._say(
                "up",
                f"created the admin account 'admin' with password {password} "
                "(shown only this once; change it in the admin).",
            )

    def _load_seed_truths(self) -> None:
        # Memory's own command, run as `migrate` is: it seeds a fresh install and leaves a used
        # one alone (core, the bottom layer, imports no app above it).
        said = io.StringIO()
        call_command("load_seed_truths", verbosity=0, stdout=said)
        for line in said.getvalue().splitlines():
            self._say("up", line)

    def _set_demo_pace(self, demo: bool) -> None:
        from apps.core.demo import demo_pace_start, demo_pace_stop

        if demo:
            for line in demo_pace_start():
                self._say("up", line)
        elif demo_pace_stop():
            self._say("up", "removed the demo's quick memory schedules; normal pace again.")

    def _child_env(self, demo: bool) -> dict[str, str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")
        if demo:
            # The stub takes a free port itself and says which: a port picked for it here could
            # be taken by another program before the stub binds it.
            from apps.core.demo import DEMO_CHAT_MODEL

            stub = Child("stub", demo_stub_command())
            self._spawn(stub, env)
            env["THALAMUS_LLM_BASE_URL"] = self._stub_url(stub)
            env["THALAMUS_DEMO"] = "1"
            # The picker and each answer's line name the model that answers: the demo's.
            env["THALAMUS_CHAT_MODEL"] = DEMO_CHAT_MODEL
        return env

    def _stub_url(self, stub: Child, timeout: float = 30.0) -> str:
        """The base URL the demo stub says it listens on."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(stub.tail):
                if found := STUB_LISTENING.search(line):
                    return found.group(1)
            if stub.process.poll() is not None:
                raise CommandError(
                    "The demo LLM stopped before it served: " + " / ".join(stub.tail)
                )
            time.sleep(0.05)
        raise CommandError(f"The demo LLM did not say where it listens within {timeout:.0f} s.")

    def _start_background(self, env: dict, concurrency: int, background_concurrency: int) -> None:
        children = [
            _worker("worker", settings.CELERY_TASK_DEFAULT_QUEUE, concurrency, "thalamus"),
            # The background LLM calls (reflection, critic, episodes, titles) on a queue and a
            # worker of their own, so they never crowd out memory upkeep, nor each other.
            _worker(
                "llm", settings.THALAMUS_BACKGROUND_QUEUE, background_concurrency, "thalamus-llm"
            ),
            Child(
                "beat",
                _celery(
                    "beat",
                    "--scheduler",
                    "django_celery_beat.schedulers:DatabaseScheduler",
                    "--pidfile=",
                ),
            ),
        ]
        for child in children:
            self._spawn(child, env)

    def _spawn(self, child: Child, env: dict, stdin: int = subprocess.DEVNULL) -> None:
        # Own session: Ctrl-C reaches only `up`, which then stops children in order.
        child.process = subprocess.Popen(
            child.argv,
            env=env,
            cwd=str(settings.BASE_DIR),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=stdin,
            start_new_session=True,
            text=True,
            bufsize=1,
        )
        self.children.append(child)
        threading.Thread(target=self._pump, args=(child,), daemon=True).start()

    def _pump(self, child: Child) -> None:
        for line in child.process.stdout:
            line = line.rstrip("\n")
            child.tail.append(line)
            self._say(child.name, line)

    def _say(self, name: str, line: str) -> None:
        with self._print_lock:
            self.stdout.write(f"{name:>6} | {line}")
            self.stdout.flush()

    def _wait_until_served(self, host: str, port: int, started_at: float) -> bool:
        """True once the login page is served; False if a child died or `up` is stopping."""
        url = f"http://{host}:{port}/accounts/login/"
        while not self._stopping.is_set():
            if self._dead_child():
                return False
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.05)
        else:
            return False
        elapsed = time.monotonic() - started_at
        self._say("up", f"Thalamus is up at http://{host}:{port}/ ({elapsed:.1f} s). Ctrl-C stops.")
        return True

    def _dead_child(self) -> Child | None:
        for child in self.children:
            if child.process.poll() is not None:
                return child
        return None

    def _supervise(self) -> str | None:
        while not self._stopping.wait(0.25):
            dead = self._dead_child()
            if dead is not None:
                time.sleep(0.2)  # let the pump print the child's last words
                reason = next((line for line in reversed(dead.tail) if line.strip()), "")
                return (
                    f"the {dead.name} process exited with code {dead.process.returncode}"
                    + (f" ({reason.strip()})" if reason else "")
                    + "; everything else was stopped."
                )
        return None

    def _stop_children(self) -> None:
        running = [c for c in self.children if c.process and c.process.poll() is None]
        for child in running:
            _signal_group(child.process, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in running:
            try:
                child.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._say("up", f"{child.name} did not stop in time; killing it.")
                _signal_group(child.process, signal.SIGKILL)
                child.process.wait(5)
        for child in self.children:
            # Celery's pool children share the group; make sure none outlives its parent.
            _signal_group(child.process, signal.SIGKILL)


# Workers and beat run at a lower CPU priority than the web process: on a busy machine background
# work yields the cores to the chat's first tokens (and to the web's start), and catches up once
# they are idle.
WORKER_NICENESS = 10


def _celery(command: str, *args: str) -> list[str]:
    """Celery's `command` for Thalamus, at WORKER_NICENESS."""
    nice = ["nice", "-n", str(WORKER_NICENESS)] if shutil.which("nice") else []
    celery = [sys.executable, "-m", "celery", "-A", "thalamus_site", command]
    return [*nice, *celery, "--loglevel", "INFO", *args]


def _worker(name: str, queue: str, concurrency: int, host_prefix: str) -> Child:
    """A Celery worker child consuming one queue."""
    return Child(
        name,
        _celery(
            "worker",
            "--queues",
            queue,
            "--concurrency",
            str(concurrency),
            "--hostname",
            f"{host_prefix}-{os.getpid()}@%h",
        ),
    )


def _clear_metrics() -> None:
    """Forget the LLM metrics of the last run: its processes are gone, and prometheus_client
    sums every file in the directory, including those of pids that may now come again."""
    shutil.rmtree(settings.THALAMUS_METRICS_DIR, ignore_errors=True)
    settings.THALAMUS_METRICS_DIR.mkdir(parents=True, exist_ok=True)


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def _check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandError(
                f"Port {port} on {host} is not available ({exc.strerror}); "
                "stop the program using it or pass --port."
            ) from None
