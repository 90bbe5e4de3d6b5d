"""What a web process loads for its first turn, loaded once it has started serving.

The web's lifespan (thalamus_site/asgi.py) runs the steps on a thread of their own right after
start-up, so /healthz answers as soon as the database and Redis do, and the first message does
not wait for what was loaded lazily before (the local embedder took 14 s in a fresh process).
A turn that comes while a step is still running waits only for its remainder: each step's loader
is guarded by its own lock. /healthz reports the process's progress under `warm`.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_report: dict | None = None


def warm_in_background(steps: list[tuple[str, Callable[[], object]]]) -> threading.Thread | None:
    """Run `steps` (name, loader) in order on a daemon thread, once a process; None if begun."""
    global _report
    with _lock:
        # A process forked from one that warmed starts its own.
        if _report is not None and _report["pid"] == os.getpid():
            return None
        _report = {"ok": False, "state": "warming", "pid": os.getpid(), "seconds": {}}
    thread = threading.Thread(target=_run, args=(steps,), name="warm-up", daemon=True)
    thread.start()
    return thread


def keep_out_of_the_collector() -> None:
    """Leave what is loaded now (the app, its lexicons, the embedder) out of the cyclic garbage
    collector's full collections: it lives as long as the process. A full collection walked all
    of it: 90-125 ms in `up`'s web process once loaded (gc.callbacks), and a turn that met one
    waited that long for its answer; after the freeze, 1-3 ms. Frozen before a fork, the pages
    those objects sit on also stay shared with the parent instead of being copied when the
    collector marks them."""
    gc.collect()
    gc.freeze()


def _run(steps: list[tuple[str, Callable[[], object]]]) -> None:
    from django.db import connection

    errors = {}
    started = time.monotonic()
    for name, load in steps:
        began = time.monotonic()
        try:
            load()
        except Exception as exc:  # a step that fails is reported; the turn then loads it lazily
            errors[name] = f"{type(exc).__name__}: {exc}"[:300]
            logger.warning("warm-up: %s failed: %s", name, errors[name])
        with _lock:
            _report["seconds"][name] = round(time.monotonic() - began, 2)
    # The steps' queries opened this thread's own connection; nothing else will close it.
    connection.close()
    keep_out_of_the_collector()
    with _lock:
        _report.update(ok=not errors, state="failed" if errors else "warm")
        if errors:
            _report["errors"] = errors
    logger.info(
        "warm-up %s in %.1f s: %s",
        "failed" if errors else "done",
        time.monotonic() - started,
        ", ".join(f"{name} {seconds} s" for name, seconds in _report["seconds"].items()),
    )


def warm_report() -> dict | None:
    """This process's warm-up so far, or None for a process that does not warm (a command, a
    test's client)."""
    with _lock:
        if _report is None or _report["pid"] != os.getpid():
            return None
        return {**_report, "seconds": dict(_report["seconds"])}
