"""The embedded PostgreSQL's cache: sized from the machine or THALAMUS_PG_SHARED_BUFFERS_MB, and
refilled after a restart by pg_prewarm's autoprewarm."""

from __future__ import annotations

import os

import psycopg
import pytest

from apps.core import embedded
from apps.core.embedded import PG_DATABASE, PG_PORT, PG_SUPERUSER, EmbeddedError
from tests.private_servers import empty_postgres


def test_the_cache_is_an_eighth_of_the_memory_within_bounds(monkeypatch):
    monkeypatch.delenv("THALAMUS_PG_SHARED_BUFFERS_MB", raising=False)
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    assert embedded.shared_buffers_mb() == min(2048, max(128, memory_mb // 8))
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 4 * 2**30 // 4096}  # a 4 GiB machine
    monkeypatch.setattr(embedded.os, "sysconf", pages.__getitem__)
    assert embedded.shared_buffers_mb() == 512


def test_the_setting_overrides_and_a_bad_one_is_told(monkeypatch):
    monkeypatch.setenv("THALAMUS_PG_SHARED_BUFFERS_MB", "3000")
    assert embedded.shared_buffers_mb() == 3000
    monkeypatch.setenv("THALAMUS_PG_SHARED_BUFFERS_MB", "16")
    assert embedded.shared_buffers_mb() == 128  # PostgreSQL's floor is far below; ours is this
    monkeypatch.setenv("THALAMUS_PG_SHARED_BUFFERS_MB", "1GB")
    with pytest.raises(EmbeddedError, match="number of megabytes, not '1GB'"):
        embedded.shared_buffers_mb()


def test_a_started_server_has_that_cache_and_refills_it_after_a_restart(monkeypatch):
    monkeypatch.setenv("THALAMUS_PG_SHARED_BUFFERS_MB", "200")
    with empty_postgres() as server:

        def connect():
            return psycopg.connect(
                host=str(server.socket_dir), port=PG_PORT, user=PG_SUPERUSER, dbname=PG_DATABASE
            )

        with connect() as conn:
            assert conn.execute("SHOW shared_buffers").fetchone() == ("200MB",)
            assert conn.execute("SHOW shared_preload_libraries").fetchone() == ("pg_prewarm",)
            conn.execute(
                "CREATE TABLE warm AS SELECT g, repeat('x', 200) AS pad "
                "FROM generate_series(1, 5000) AS g"
            )
        server.stop()  # writes down the pages its cache holds
        assert (server.pgdata / "autoprewarm.blocks").exists()
        server.start()
        with connect() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
            for _ in range(100):  # the autoprewarm worker reads them back just after start
                cached = conn.execute(
                    "SELECT count(*) FROM pg_buffercache "
                    "WHERE relfilenode = pg_relation_filenode('warm')"
                ).fetchone()[0]
                if cached:
                    break
                conn.execute("SELECT pg_sleep(0.05)")
            assert cached > 0
