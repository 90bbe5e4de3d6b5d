from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from apps.core.ports import free_port
from tests._environment import STUB
from tests.private_servers import HEALTH_TOKEN, wait_for_http, wait_until_warm

ROOT = Path(__file__).resolve().parent.parent

# The files that take longest, longest first: each file alone (`--durations=0`, summed), or a
# whole run's `--durations` where a loaded run slows it most; 27 Nov 2026, from 10 s up. `make
# test` hands files to the workers in collection order (--no-loadscope-reorder); a long file
# handed out last keeps one worker busy while the others have finished.
LONGEST_FIRST = (
    "tests/real_llm/",
    "tests/chat/test_multiprocess.py",
    "tests/core/test_backup.py",
    "tests/cognition/test_worker_loss.py",
    "tests/cognition/test_quarantine.py",
    "tests/cognition/test_reflection_timing.py",
    "tests/cognition/test_weak_local_model.py",
    "tests/cognition/test_background_outcomes.py",
    "tests/browser/test_accessibility.py",
    "tests/security/test_canaries.py",
    "tests/core/test_restarts.py",
    "tests/memory/test_recall_scale.py",
    "tests/browser/test_redis_restart.py",
    "tests/core/test_up.py",
    "tests/core/test_up_warm.py",
    "tests/core/test_up_web_processes.py",
    "tests/imports/test_fuzz.py",
    "tests/security/test_hostile_output.py",
    "tests/security/test_every_door.py",
    "tests/cognition/test_background_budget.py",
    "tests/cognition/test_reflection.py",
    "tests/imports/test_imports.py",
    "tests/core/test_embedded_redis.py",
    "tests/memory/test_eval_retrieval.py",
)


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        path = item.path.relative_to(ROOT).as_posix()
        return next(
            (n for n, prefix in enumerate(LONGEST_FIRST) if path.startswith(prefix)),
            len(LONGEST_FIRST),
        )

    items.sort(key=rank)  # stable: the rest keep their order


@pytest.fixture(scope="session", autouse=True)
def _few_password_rounds():
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["tests.passwords.FewRoundsPBKDF2PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _fresh_runtime_config():
    """The cache outlives the flushed database between tests; never let a config leak."""
    from apps.core.prompts import PROMPT_PLACEHOLDERS
    from apps.core.selectors import forget_prompt_override, forget_runtime_config

    forget_runtime_config()
    # An admin's prompt override is cached too, and its row may be gone with the database.
    for name in PROMPT_PLACEHOLDERS:
        forget_prompt_override(name)
    yield


@pytest.fixture(autouse=True)
def _fresh_model_limits():
    """What a server said of its limits, and the token calibration, belong to one test."""
    from apps.core.llm.limits import forget_model_limits

    forget_model_limits()
    yield


@pytest.fixture
def config(db):
    """Change runtime settings for one test: config(critic_enabled=False)."""

    def change(**values):
        from apps.core.models import RuntimeConfig
        from apps.core.services import runtime_config_save

        current = RuntimeConfig.objects.order_by("pk").first() or RuntimeConfig()
        for name, value in values.items():
            setattr(current, name, value)
        return runtime_config_save(config=current)

    yield change
    from apps.core.selectors import forget_runtime_config

    forget_runtime_config()


@pytest.fixture
def default_schedules(db):
    """The beat schedules the migration creates; transactional tests flush them, so recreate."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("apps.core.migrations.0005_default_schedules")
    migration.create_schedules(apps, None)


@pytest.fixture
def llm_stub():
    """The LLM stub of this test process, emptied of scripts, faults and logged requests."""
    STUB.reset()
    yield STUB
    STUB.reset()


@pytest.fixture
def no_outbound_in_atomic(request):
    """Fail the test if an LLM, embedding or HTTP call starts inside a transaction the product
    opened (tests/outbound.py); the test's own transaction does not count."""
    from tests.outbound import no_outbound_call_in_atomic

    # After the test's database, so that the atomic blocks around the test are set aside.
    uses_db = {"db", "transactional_db"} & set(request.fixturenames)
    if uses_db or request.node.get_closest_marker("django_db"):
        request.getfixturevalue("db")

    with no_outbound_call_in_atomic() as found:
        yield found


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="correct-horse-battery-9")


@pytest.fixture
def alice(client, user):
    """The test client, signed in as `user` (alice)."""
    client.force_login(user)
    return client


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("mallory", password="correct-horse-battery-9")


@pytest.fixture(scope="session", autouse=True)
def _no_session_outlives_the_test_database(django_db_setup, django_db_blocker):
    """End every other connection to the test database before pytest-django drops it.

    The uvicorn child, the Celery worker and the web process's recall threads keep persistent
    connections; left open, they make the DROP fail and leave a test database behind.
    """
    yield
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(scope="session")
def asgi_server(django_db_setup, django_db_blocker):
    """The real ASGI app under uvicorn, in a child process, on the test database.

    Tests that use it need committed data (`transactional_db`), since the server has its own
    connection.
    """
    with serve_asgi() as url:
        yield url


@contextlib.contextmanager
def serve_asgi(**extra_env: str):
    """`asgi_server`'s server, with these environment variables added (THALAMUS_DEMO="1")."""
    db = settings.DATABASES["default"]
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}&port={db['PORT']}"
        ),
        "REDIS_URL": settings.REDIS_URL,
        "THALAMUS_HEALTH_TOKEN": HEALTH_TOKEN,
        "PYTHONUNBUFFERED": "1",
        **extra_env,
    }
    # The server runs as in production: an ORM call made on its event loop fails here too
    # (the test process allows them for Playwright's sake).
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            # The product's app, its routes recorded for the coverage gate.
            "tests.recorded_asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--lifespan",
            "on",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/accounts/login/", 30, process)
        wait_until_warm(url, 60, process)
        yield url
    finally:
        process.terminate()
        process.wait(10)


# Module scope: Playwright's sync API keeps an event loop running in this thread while it is
# open, and async tests that run after it in the same process need that loop gone.
@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    assert executable, "Debian's chromium is required for browser tests (make test installs it)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, django_db_blocker):
    context = chromium.new_context()
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()
    _database_quiet(django_db_blocker)


def _database_quiet(django_db_blocker, *, seconds: float = 5.0) -> None:
    """Wait until no other connection to the test database runs a statement: a closed page's
    last requests and socket disconnects still run in the test server, and a transactional
    test's flush that truncates the tables meanwhile can deadlock with them."""
    from django.db import connection
    from django.db.utils import Error

    deadline = time.monotonic() + seconds
    with django_db_blocker.unblock():
        try:
            while time.monotonic() < deadline:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND pid <> pg_backend_pid() AND state <> 'idle'"
                    )
                    if not cursor.fetchone()[0]:
                        return
                time.sleep(0.05)
        except Error:  # no test database (a test without one): nothing to wait for
            return


@pytest.fixture
def log_in(page, asgi_server, django_user_model):
    """Log the page in as `username` and open the home page, where the login form lands.

    The session is the one Django's login makes, handed to the browser as its cookie: the form
    itself has its own browser tests (tests/browser/test_login.py, the admin's), and going
    through it cost every other browser test two page loads and a full-round password check.
    """

    def log_in_as(username: str):
        from django.test import Client

        client = Client()
        client.force_login(
            django_user_model.objects.get(username=username),
            backend="django.contrib.auth.backends.ModelBackend",
        )
        session = client.cookies[settings.SESSION_COOKIE_NAME].value
        page.context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": asgi_server}]
        )
        page.goto(f"{asgi_server}/")
        return page

    return log_in_as


@pytest.fixture
def celery_worker(transactional_db):
    """A real Celery worker (in a thread of this process) consuming this test process's queue."""
    from celery.contrib.testing.worker import start_worker

    from thalamus_site.celery import app

    # The worker stops when its blocking read of the broker returns: kombu's Redis transport
    # waits up to a second for a task, which made the teardown of each of some 70 tests with a
    # worker take 1.2 s. A tenth of a second instead; a task that comes is still taken at once.
    options = app.conf.broker_transport_options
    app.conf.broker_transport_options = {**options, "polling_interval": 0.1}
    try:
        with start_worker(
            app,
            pool="solo",
            concurrency=1,
            perform_ping_check=False,
            shutdown_timeout=15,
            # Both queues: memory upkeep and the background LLM calls.
            queues=[settings.CELERY_TASK_DEFAULT_QUEUE, settings.THALAMUS_BACKGROUND_QUEUE],
        ) as worker:
            yield worker
    finally:
        app.conf.broker_transport_options = options
