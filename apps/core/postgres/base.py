"""Django's PostgreSQL backend, with the health check of a reused connection made without a
round trip when the connection shows nothing wrong, and statements prepared when asked.

With CONN_HEALTH_CHECKS, Django pings a reused connection (`SELECT 1`) before the first query
of every request, and under ASGI every thread hop counts as one: a chat turn makes eight to ten
of them, each a round trip and the CPU of a cursor, on the way to the answer's request.

A server that ends a session (a restart, a shutdown, `pg_terminate_backend`, an idle timeout)
tells the client so and closes the socket, so the socket of an idle connection has something
to read. An idle connection's socket with nothing to read is taken as alive; one with
anything to read, or a connection psycopg found broken, gets Django's ping, which reads what
the server said and closes the connection when it was ended. What this cannot see is a server
gone without a word (its machine lost power, the network cut): the next query then fails once,
as it could a moment after any ping.

Django leaves psycopg without a prepare threshold, and then psycopg prepares nothing, not even
what `apps.core.db.fetch_hot` asks to prepare. Here the threshold is out of reach instead:
a statement is prepared only when asked, as Django's own statements, their parameters inlined
into the text, seldom repeat.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base

# Executions of one statement text after which psycopg would prepare it unasked: never.
ONLY_WHEN_ASKED = 2**31 - 1


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        if connection.prepare_threshold is None:
            connection.prepare_threshold = ONLY_WHEN_ASKED
        return connection

    def close_if_health_check_failed(self) -> None:
        if (
            self.connection is None
            or not self.health_check_enabled
            or self.health_check_done
            or self.pool
        ):
            return
        if self._quiet():
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def _quiet(self) -> bool:
        """The connection is idle and intact and the server has said nothing since its last
        reply."""
        connection = self.connection
        if connection.closed or connection.broken:
            return False
        try:
            fd = connection.fileno()
            readable, _, failed = select.select([fd], [], [fd], 0)
        except (OSError, ValueError):
            return False
        return not readable and not failed
