"""`manage.py up --web-processes 2`: two web processes forked from one that imported the app serve
the one port, and stopping `up` stops them all."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from apps.core.ports import free_port
from tests.core.test_up import ROOT, _env, _processes_mentioning, _stop, _wait_healthy
from tests.private_servers import pool_children, wait_for_http


def _web_workers(up_pid: int) -> list[int]:
    """The web server's processes: forked from the one `up` started, after it imported the app."""
    (web,) = [
        pid
        for pid in pool_children(up_pid)
        if b"thalamus_site.serve" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    return pool_children(web)


@pytest.mark.timeout(240)
def test_up_runs_two_web_processes_on_one_port_and_stops_them(tmp_path):
    data_dir = tmp_path / "data"
    port = free_port()
    log_path = tmp_path / "up.log"
    process = subprocess.Popen(
        [sys.executable, "manage.py", "up", "--port", str(port), "--web-processes", "2"],
        cwd=ROOT,
        env=_env(data_dir),
        stdout=log_path.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/healthz", process, log_path)
        workers = _web_workers(process.pid)
        assert len(workers) == 2, log_path.read_text()
        for _ in range(4):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/") as response:
                assert response.status == 200
    finally:
        code = _stop(process)
    assert code == 0, log_path.read_text()
    assert "stopped cleanly" in log_path.read_text()
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]
    assert not _processes_mentioning(str(data_dir)), "processes outlived up"


def test_up_refuses_no_web_process(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "up", "--port", str(free_port()), "--web-processes", "0"],
        cwd=ROOT,
        env=_env(tmp_path / "data"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "--web-processes must be 1 or more." in result.stderr
    assert "Traceback" not in result.stderr


def test_up_runs_two_web_processes_by_default_on_two_cores_or_more(monkeypatch):
    from apps.core.management.commands.up import Command

    parser = Command().create_parser("manage.py", "up")
    assert parser.parse_args([]).web_processes == min(2, os.cpu_count() or 1)
    # THALAMUS_WEB_PROCESSES sets it; it is read with the settings.
    monkeypatch.setenv("THALAMUS_WEB_PROCESSES", "3")
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from thalamus_site import settings; print(settings.THALAMUS_WEB_PROCESSES)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "3"


def _serve(port: int, *extra: str, **popen) -> subprocess.Popen:
    from apps.core.management.commands.up import web_command

    return subprocess.Popen(
        [*web_command("127.0.0.1", port, 2), *extra],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
        **popen,
    )


@pytest.mark.timeout(120)
def test_the_web_server_waits_for_go_and_leaves_when_up_is_gone():
    port = free_port()
    process = _serve(port, "--after-go", stdin=subprocess.PIPE)
    try:
        # The app imports, and nothing listens until `up` says go; `up` going away ends it.
        process.stdin.close()
        assert process.wait(90) == 0
        probe = socket.socket()
        probe.bind(("127.0.0.1", port))  # never bound
        probe.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.timeout(120)
def test_a_web_process_that_dies_stops_the_server_with_an_error():
    port = free_port()
    process = _serve(port)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/accounts/login/", 90, process)
        first, second = pool_children(process.pid)
        os.kill(first, signal.SIGKILL)
        # `up` sees its web child exit non-zero, says so and stops everything.
        assert process.wait(30) == 1
        assert not Path(f"/proc/{second}").exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
