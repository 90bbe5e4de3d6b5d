"""Loaded with `-p tests._environment` before Django is set up (see pyproject's addopts).

Each pytest process (the xdist controller and every worker) gets its own instance name, so cache
keys, channel groups and the Celery queue never cross between parallel workers, and its own LLM
stub, whose URL child processes (the web server of browser tests) inherit. The embedded
PostgreSQL and Redis are shared; the last process to leave stops them.
"""

from __future__ import annotations

import gc
import os
import shutil

from apps.core import embedded
from llm_stub import StubServer

# The route coverage gate (whole-suite runs fail if a route was never exercised).
pytest_plugins = ["tests.route_coverage"]

_worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
os.environ["THALAMUS_INSTANCE"] = f"test-{_worker}-{os.getpid()}"
# One test database per pytest run (xdist adds its worker suffix), so parallel runs on one
# machine never fight over it.
os.environ.setdefault("THALAMUS_TEST_DATABASE", f"test_thalamus_{os.getpid()}")
os.environ.setdefault("THALAMUS_EMBED_DIM", "64")
os.environ.pop("THALAMUS_DEMO", None)
# Playwright's sync API keeps an event loop running in the test thread; the ORM calls the tests
# make there are still synchronous and safe.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

STUB = StubServer(port=0).start()
os.environ["THALAMUS_LLM_BASE_URL"] = STUB.url


def pytest_configure(config):
    embedded.acquire()


def pytest_unconfigure(config):
    STUB.stop()
    # Celery's AsyncResults unsubscribe from Redis when collected; collect them while it runs,
    # not at exit after it stopped (twenty reconnect attempts, a second each).
    gc.collect()
    embedded.release()
    from django.conf import settings

    if settings.configured:
        # The LLM metrics' directory belongs to this process's instance name, used only once.
        shutil.rmtree(settings.THALAMUS_METRICS_DIR, ignore_errors=True)
