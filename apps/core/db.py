"""Running the hot path's few big statements: a turn's save, its plan and graph, its searches."""

from __future__ import annotations

import json
import struct
import time

import numpy as np
import psycopg
from channels.db import database_sync_to_async
from django.db import connection
from psycopg.adapt import Dumper
from psycopg.postgres import types as pg_types
from psycopg.pq import Format

_FLOAT4 = pg_types["float4"]


class QueryVector:
    """A vector sent as a parameter: PostgreSQL gets a real[] (binary where the statement's
    parameters are bound on the server, as by `fetch_hot`), which the SQL casts with ::vector.

    The text form of a 768-dimensional vector takes ~0.5 ms of Python to write and a few
    thousand digits for the server to parse, twice a turn on the way to the answer.
    """

    __slots__ = ("values",)

    def __init__(self, values) -> None:
        self.values = values


class _QueryVectorTextDumper(Dumper):
    oid = _FLOAT4.array_oid

    def dump(self, obj: QueryVector) -> bytes:
        return ("{" + ",".join(f"{value:.7g}" for value in obj.values) + "}").encode()


class _QueryVectorBinaryDumper(Dumper):
    format = Format.BINARY
    oid = _FLOAT4.array_oid
    _ITEM = np.dtype([("size", ">i4"), ("value", ">f4")])

    def dump(self, obj: QueryVector) -> bytes:
        # Array header (one dimension, no NULLs, float4 items, its length, lower bound 1),
        # then each item as its byte length and its big-endian value.
        values = np.asarray(obj.values, dtype=np.float32)
        items = np.empty(len(values), dtype=self._ITEM)
        items["size"] = 4
        items["value"] = values
        return struct.pack(">iiIii", 1, 0, _FLOAT4.oid, len(values), 1) + items.tobytes()


def register_adapters() -> None:
    """Teach psycopg the parameter types above; the core app does it as Django starts."""
    psycopg.adapters.register_dumper(QueryVector, _QueryVectorTextDumper)
    psycopg.adapters.register_dumper(QueryVector, _QueryVectorBinaryDumper)


class RowModel:
    """Instances of `model` from the columns of a row that `fetch_hot` read, as the ORM would
    load them (its fields' own conversions applied), without building a query: `columns(alias)`
    names them in the statement, `load(values)` makes the instance."""

    def __init__(self, model) -> None:
        self.model = model
        self.fields = list(model._meta.concrete_fields)
        self.attnames = [field.attname for field in self.fields]
        self.width = len(self.fields)
        self._convert = [
            (index, field)
            for index, field in enumerate(self.fields)
            if hasattr(field, "from_db_value")
        ]

    def columns(self, alias: str) -> str:
        return ", ".join(f'{alias}."{field.column}"' for field in self.fields)

    def load(self, values):
        values = list(values)
        for index, field in self._convert:
            values[index] = field.from_db_value(values[index], None, connection)
        return self.model.from_db(connection.alias, self.attnames, values)


def json_value(value):
    """A json or jsonb column's value: Django's psycopg setup hands them over as text."""
    return json.loads(value) if isinstance(value, str) else value


def on_pool_thread(function):
    """`function` as a coroutine run on the event loop's thread pool, with Channels' care of
    database connections. Not thread-sensitive: outside a request's context that would put
    every caller in the process on one thread, one after another."""
    return database_sync_to_async(function, thread_sensitive=False)


def fetch_hot(sql: str, params: dict, *, prepare: bool = False) -> list[tuple]:
    """Run one of the turn's statements with its parameters bound on the server.

    Django's cursors inline parameters into the SQL text: a search names its query vector four
    times, so the server would parse four copies of a few thousand digits (about 1 ms a search
    on our machine), and a message of 32,000 characters would be escaped into the statement.
    Bound as parameters, each travels and is parsed once.

    `prepare`: prepared on the connection, the statement is parsed once, and PostgreSQL plans it
    again only while a plan for any parameters does not do as well as the plans it made for the
    ones it was given. Planning was most of the turn's statements' server time (3.7 ms a turn
    against 0.8 ms of execution, EXPLAIN ANALYZE). For a statement whose best plan does not
    depend on how much its owner holds: a lookup by key or conversation, a capped list, the
    memory search of an owner with few rows (search_selectors.FEW_ROWS_MARK) and the episode
    search (which reads all of an owner's episodes whatever the plan). A bigger owner's memory
    searches are planned for their parameters every time: prepared for every owner, the plans
    settled on for users with few memories cost a user with 10,000 memories 45 ms a turn
    (bench.api_ttft), and a generic plan's HNSW scan lost most of its recall (0.42 at 100k rows
    in bench/retrieval, against 1.00). Behind a transaction pooler, prepared statements need one
    that keeps them (PgBouncer 1.21 or later, with max_prepared_statements).
    """
    # Django's own cursors check a reused connection first (CONN_HEALTH_CHECKS; apps.core.postgres);
    # so does this, or a database restart would fail the next turn on every pooled connection.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    started = time.monotonic()
    try:
        # Errors come out as Django's (IntegrityError, …), as from its own cursors.
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(sql, params, prepare=prepare)
            return cursor.fetchall()
    finally:
        # Logged where Django logs its own cursors' statements (DEBUG, or a test counting them
        # with CaptureQueriesContext): the turn's statements are counted with the rest.
        if connection.queries_logged:
            connection.queries_log.append({"sql": sql, "time": f"{time.monotonic() - started:.3f}"})
