"""Shared bits of the benchmarks: run `manage.py up` on a throwaway data dir and time things."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from apps.core.ports import free_port  # noqa: F401  (re-exported for the benchmarks)

ROOT = Path(__file__).resolve().parent.parent


def up_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(THALAMUS_DATA_DIR=str(data_dir), THALAMUS_ADMIN_PASSWORD="bench-admin-pass-1")
    env.update(extra)
    return env


def start_up(
    data_dir: Path, port: int, log_path: Path, *up_args: str, **extra: str
) -> subprocess.Popen:
    """`manage.py up` on `port` with `up_args` added, its environment updated with `extra`."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "up", "--port", str(port), *up_args],
        cwd=ROOT,
        env=up_env(data_dir, **extra),
        stdout=log_path.open("w"),
        stderr=subprocess.STDOUT,
    )


def wait_for_page(url: str, process: subprocess.Popen, timeout: float = 120) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"up exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return time.monotonic() - started
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(url)


def stop_up(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(60)


def summary(values_ms: list[float]) -> str:
    ordered = sorted(values_ms)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return (
        f"median {statistics.median(ordered):.1f} ms, p95 {p95:.1f} ms "
        f"(n={len(ordered)}, min {ordered[0]:.1f}, max {ordered[-1]:.1f})"
    )


def create_database(url: str, name: str) -> None:
    """Create database `name` on the server of `url` unless it exists."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        if not exists.fetchone():
            connection.execute(f"CREATE DATABASE {name}")


def cpu_times() -> list[int]:
    """The machine's CPU time counters (user, nice, system, idle, iowait, irq, softirq, steal)."""
    with open("/proc/stat") as stat:
        return [int(value) for value in stat.readline().split()[1:9]]


def steal_share(before: list[int], after: list[int]) -> float:
    """The share of CPU time the hypervisor took between two readings: figures taken while it is
    high measure the host's other tenants as much as our code."""
    spent = [b - a for a, b in zip(before, after, strict=True)]
    return spent[7] / max(1, sum(spent))


def cpu_reference_ms() -> float:
    """This machine's speed now: the best of ten runs of a fixed pure-Python workload.

    The VM's speed drifts by up to 2x within a day (same code, same load, no steal reported);
    figures from runs whose reference differs are not comparable until scaled by it.
    """
    best = float("inf")
    for _ in range(10):
        started = time.perf_counter()
        total = 0
        for number in range(1_000_000):
            total += number * number % 7
        best = min(best, time.perf_counter() - started)
    return best * 1000


def django_on_fresh_database(*, database: str, instance: str, llm_url: str, quiet=()) -> None:
    """Start the embedded servers and point Django, migrated, at a fresh database `database`
    of its own, under THALAMUS_INSTANCE `instance` (its own queue, cache keys and groups)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")
    os.environ["THALAMUS_INSTANCE"] = instance
    os.environ["THALAMUS_LLM_BASE_URL"] = llm_url
    if os.environ.get("DATABASE_URL"):
        sys.exit("this benchmark runs on the embedded PostgreSQL only; unset DATABASE_URL.")
    from apps.core import embedded

    embedded.acquire()
    base = embedded.database_url()
    import psycopg

    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {database}")
        connection.execute(f"CREATE DATABASE {database}")
    os.environ["DATABASE_URL"] = base.replace(f"/{embedded.PG_DATABASE}?", f"/{database}?")
    import logging

    import django

    django.setup()
    for noisy in ("thalamus.llm_stub", "httpx", "httpx2", *quiet):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
