"""The embedded Redis is up only once it has read its data back."""

from __future__ import annotations

import os
import subprocess

import redis

from apps.core import embedded
from tests.private_servers import private_redis


def test_a_restarted_redis_answers_its_first_command_with_its_data():
    with private_redis() as server:
        client = redis.Redis(unix_socket_path=str(server.socket_path))
        # Enough data that reading the append-only file back takes a noticeable while.
        with client.pipeline(transaction=False) as pipe:
            for number in range(200_000):
                pipe.set(f"key:{number}", "x" * 200)
            pipe.execute()
        client.close()
        server.stop()
        server.start()
        client = redis.Redis(unix_socket_path=str(server.socket_path))
        try:
            # Before the wait for loading, this first command met "Redis is loading the
            # dataset in memory".
            assert client.get("key:199999") == b"x" * 200
            assert client.dbsize() == 200_000
        finally:
            client.close()


def test_a_server_that_has_exited_counts_as_stopped_before_it_is_reaped():
    exited = subprocess.Popen(["true"])
    # Waited for but not reaped: a zombie, as a daemonised server is until PID 1 reaps it,
    # which may be seconds after it exited.
    os.waitid(os.P_PID, exited.pid, os.WEXITED | os.WNOWAIT)
    try:
        assert not embedded._pid_alive(exited.pid)
        assert embedded._pid_alive(os.getpid())
    finally:
        exited.wait()
