"""`manage.py up` as a newcomer runs it: a real process tree on a fresh data dir."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from apps.core.ports import free_port

ROOT = Path(__file__).resolve().parent.parent.parent


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        THALAMUS_DATA_DIR=str(data_dir),
        THALAMUS_INSTANCE="up-test",
        THALAMUS_ADMIN_PASSWORD="first-admin-pass-1",
        THALAMUS_HEALTH_TOKEN="up-test-monitor",
        PYTHONUNBUFFERED="1",
    )
    return env


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


def _start(data_dir: Path, port: int, log_path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "up", "--port", str(port)],
        cwd=ROOT,
        env=_env(data_dir),
        stdout=log_path.open("w"),
        stderr=subprocess.STDOUT,
    )


def _wait_healthy(url: str, process: subprocess.Popen, log_path: Path) -> dict:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert process.poll() is None, log_path.read_text()
        try:
            request = urllib.request.Request(
                url, headers={"Authorization": "Bearer up-test-monitor"}
            )
            with urllib.request.urlopen(request, timeout=2) as response:
                body = json.load(response)
                if body["worker"]["ok"]:
                    return body
        except OSError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"not healthy in time:\n{log_path.read_text()}")


def _stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(60)


@pytest.mark.timeout(240)
def test_up_serves_healthz_and_stops_cleanly_twice(tmp_path):
    data_dir = tmp_path / "data"
    for attempt in range(2):
        port = free_port()
        log_path = tmp_path / f"up-{attempt}.log"
        process = _start(data_dir, port, log_path)
        try:
            health = _wait_healthy(f"http://127.0.0.1:{port}/healthz", process, log_path)
            assert health["database"]["ok"] and health["pgvector"]["ok"] and health["redis"]["ok"]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/") as response:
                assert response.status == 200
        finally:
            code = _stop(process)
        log = log_path.read_text()
        assert code == 0, log
        assert "stopped cleanly" in log
        assert ("created the admin account" in log) == (attempt == 0)
        assert not _processes_mentioning(str(data_dir)), "processes outlived up"
        assert not (data_dir / "postgres" / "postmaster.pid").exists()
        assert not (data_dir / "redis" / "redis.pid").exists() or not _processes_mentioning(
            "redis.sock"
        )


def test_up_refuses_a_port_in_use(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "manage.py", "up", "--port", str(port)],
            cwd=ROOT,
            env=_env(tmp_path / "data"),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode != 0
    assert f"Port {port} on 127.0.0.1 is not available" in result.stderr
    assert "Traceback" not in result.stderr


def test_up_refuses_a_data_dir_it_cannot_write(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = subprocess.run(
        [sys.executable, "manage.py", "up", "--port", str(free_port())],
        cwd=ROOT,
        env=_env(blocker / "data"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "is not writable" in result.stderr and "THALAMUS_DATA_DIR" in result.stderr
    assert "Traceback" not in result.stderr


def test_up_refuses_an_unreachable_database_url(tmp_path):
    env = _env(tmp_path / "data")
    env["DATABASE_URL"] = f"postgresql://nobody@127.0.0.1:{free_port()}/nothing"
    result = subprocess.run(
        [sys.executable, "manage.py", "up", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "Cannot reach the database 'nothing' at 127.0.0.1" in result.stderr
    assert "Traceback" not in result.stderr
