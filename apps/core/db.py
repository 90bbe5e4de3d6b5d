"""Running the hot path's few big statements: a turn's save, its plan and graph, its searches."""

from __future__ import annotations

import json

import psycopg
from django.db import connection


def json_value(value):
    """A json or jsonb column's value: Django's psycopg setup hands them over as text."""
    return json.loads(value) if isinstance(value, str) else value


def fetch_hot(sql: str, params: dict) -> list[tuple]:
    """Run one of the turn's statements with its parameters bound on the server.

    Django's cursors inline parameters into the SQL text: a search names its query vector four
    times, so the server would parse four copies of a few thousand digits (about 1 ms a search
    on our machine), and a message of 32,000 characters would be escaped into the statement.
    Bound as parameters, each travels and is parsed once.

    Not prepared: with a generic plan, the filtered HNSW path of the memory search lost most of
    its recall (0.42 at 100k rows in bench/retrieval, against 1.00), and a prepared statement
    with custom plans saved only its parsing (~0.4 ms) at the price of transaction poolers.
    """
    connection.ensure_connection()
    # Errors come out as Django's (IntegrityError, …), as from its own cursors.
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
