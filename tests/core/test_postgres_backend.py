"""The health check of a reused connection (apps.core.postgres): no round trip while the
server has said nothing; a connection the server ended is closed and opened again."""

from __future__ import annotations

import time

import pytest
from django.db import close_old_connections, connection, connections

pytestmark = pytest.mark.django_db(transaction=True)


def _pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _pings(monkeypatch) -> list[int]:
    """Django's ping of the connection (`is_usable`), counted as it is made."""
    made: list[int] = []
    wrapper = type(connections["default"])
    ping = wrapper.is_usable

    def counted(self):
        made.append(1)
        return ping(self)

    monkeypatch.setattr(wrapper, "is_usable", counted)
    return made


def test_a_quiet_reused_connection_is_checked_without_a_round_trip(monkeypatch):
    first = _pid()
    pings = _pings(monkeypatch)
    for _ in range(3):
        close_old_connections()  # what every thread hop does before and after its call
        assert _pid() == first
    assert connection.health_check_enabled and pings == []


def test_a_connection_the_server_ended_is_pinged_closed_and_opened_again(monkeypatch):
    ended = _pid()
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [ended])
        # The server's notice and the closed socket reach this side.
        deadline = time.monotonic() + 5
        while connection._quiet() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        other.close()
    pings = _pings(monkeypatch)
    close_old_connections()
    # The next query runs on a new session, at the first attempt.
    assert _pid() != ended
    assert pings == [1]
