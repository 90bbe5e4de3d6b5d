"""Time from `manage.py up` (what `make run` runs) to /healthz 200, on fresh data dirs and on
restarts of the same one, with the machine's load beside each figure.

Run: .venv/bin/python -m bench.startup [--runs 3] [-- <extra up arguments>]

Each fresh start gets an empty data dir (initdb, every migration, the first admin); each restart
then starts `up` again on the data dir of the fresh start before it. Per start it reports when
/healthz first answered 200, when the login page did, and when /healthz's `warm` part said the
web process had loaded what a first turn needs, and the CPU time `up` and its children had spent
by /healthz 200 (PostgreSQL's server processes not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from bench._harness import cpu_times, free_port, start_up, steal_share, stop_up

HEALTH_TOKEN = "bench-startup-monitor"


def _get(url: str) -> tuple[int, dict | None]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {HEALTH_TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            body = response.read()
            try:
                return response.status, json.loads(body)
            except ValueError:
                return response.status, None
    except urllib.error.HTTPError as exc:
        return exc.code, None


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of `pid` and its descendants so far, those that exited included: the work done
    to start, which the machine's load does not change as much as it changes the wall time."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        # utime, stime, cutime, cstime (fields 14-17 of proc(5); 12-15 after the name)
        total += sum(int(value) for value in fields[11:15])
        pending.extend(int(child) for child in children)
    return total / ticks


def time_start(data_dir: Path, log_path: Path, up_args: list[str], timeout: float = 120) -> dict:
    """Seconds from `up`'s start to /healthz 200, to the login page, and to `warm` done."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    load = os.getloadavg()[0]
    cpu_before = cpu_times()
    started = time.monotonic()
    process = start_up(data_dir, port, log_path, *up_args, THALAMUS_HEALTH_TOKEN=HEALTH_TOKEN)
    found: dict[str, float] = {}
    try:
        while len(found) < 4 and time.monotonic() - started < timeout:
            if process.poll() is not None:
                raise RuntimeError(f"up exited with {process.returncode}: {log_path.read_text()}")
            try:
                if "healthz" not in found or "warm" not in found:
                    status, body = _get(f"{base}/healthz")
                    now = time.monotonic() - started
                    if status == 200:
                        if "healthz" not in found:
                            found["cpu"] = tree_cpu_seconds(process.pid)
                        found.setdefault("healthz", now)
                        warm = (body or {}).get("warm", {})
                        # Done, or failed (no LLM server to embed with): no longer warming.
                        if warm.get("state") != "warming":
                            found.setdefault("warm", now)
                if "login" not in found:
                    status, _ = _get(f"{base}/accounts/login/")
                    if status == 200:
                        found.setdefault("login", time.monotonic() - started)
            except OSError:
                pass
            time.sleep(0.02)
    finally:
        stop_up(process)
    if len(found) < 4:
        raise TimeoutError(f"not up within {timeout:.0f} s: {found}; see {log_path}")
    found["load"] = load
    found["steal"] = steal_share(cpu_before, cpu_times())
    return found


def _line(label: str, timing: dict) -> str:
    return (
        f"{label:<10} healthz {timing['healthz']:5.2f} s  login {timing['login']:5.2f} s  "
        f"warm {timing['warm']:5.2f} s  cpu {timing['cpu']:5.1f} s  "
        f"(load {timing['load']:.2f}, steal {timing['steal']:.0%})"
    )


def _median(label: str, timings: list[dict]) -> str:
    return (
        f"{label:<10} median of {len(timings)}: healthz "
        f"{statistics.median(t['healthz'] for t in timings):.2f} s, login "
        f"{statistics.median(t['login'] for t in timings):.2f} s, warm "
        f"{statistics.median(t['warm'] for t in timings):.2f} s, cpu "
        f"{statistics.median(t['cpu'] for t in timings):.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3, help="fresh starts, and as many restarts")
    parser.add_argument("up_args", nargs="*", help="extra arguments for `manage.py up`")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        subprocess.run(
            ["git", "log", "-1", "--format=%h %s"], capture_output=True, text=True
        ).stdout.strip()
    )
    fresh, restart = [], []
    with tempfile.TemporaryDirectory(prefix="thalamus-bench-") as tmp:
        for run in range(args.runs):
            data_dir = Path(tmp) / f"data-{run}"
            timing = time_start(data_dir, Path(tmp) / f"fresh-{run}.log", args.up_args)
            fresh.append(timing)
            print(_line(f"fresh #{run + 1}", timing), flush=True)
            timing = time_start(data_dir, Path(tmp) / f"restart-{run}.log", args.up_args)
            restart.append(timing)
            print(_line(f"restart #{run + 1}", timing), flush=True)
    print(_median("fresh", fresh))
    print(_median("restart", restart))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
