"""Parameters of the hot path's statements: a query vector bound as a binary real[]."""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings
from django.db import connection

from apps.core.db import QueryVector, fetch_hot

pytestmark = pytest.mark.django_db


def test_a_query_vector_reaches_postgres_intact_bound_on_the_server_or_inlined():
    values = np.random.default_rng(7).normal(size=768).astype(np.float32).tolist()
    sql = (
        "SELECT %(v)s::vector::real[], vector_dims(%(v)s::vector), %(v)s::vector <=> %(v)s::vector"
    )
    ((bound, dims, distance),) = fetch_hot(sql, {"v": QueryVector(values)})
    assert np.array_equal(np.asarray(bound, dtype=np.float32), np.asarray(values, dtype=np.float32))
    assert dims == 768 and distance == 0
    # Django's own cursors inline parameters as text; the same SQL works there.
    with connection.cursor() as cursor:
        cursor.execute(sql, {"v": QueryVector(values)})
        inlined, dims, _ = cursor.fetchone()
    assert dims == 768 and np.allclose(inlined, values, rtol=1e-6)


def test_no_query_vector_is_a_null():
    ((value,),) = fetch_hot("SELECT %(v)s::vector IS NULL", {"v": None})
    assert value is True


def _prepared() -> list[str]:
    return [row[0] for row in fetch_hot("SELECT statement FROM pg_prepared_statements", {})]


def test_a_hot_statement_is_prepared_once_on_its_connection(user):
    sql = "SELECT %(a)s::int + %(b)s::int"
    assert [fetch_hot(sql, {"a": n, "b": 1}) for n in (1, 2, 3)] == [[(2,)], [(3,)], [(4,)]]
    assert [text for text in _prepared() if "$1::int + $2::int" in text] == [
        "SELECT $1::int + $2::int"
    ]


def test_the_memory_search_is_prepared_unless_an_hnsw_index_can_serve_it(user, monkeypatch):
    """Under a generic plan the HNSW scan loses most of its recall (apps.core.db.fetch_hot);
    the exact scan of the half-precision copies has no such index."""
    from apps.core.models import RuntimeConfig
    from apps.memory import search_selectors
    from apps.memory.search_selectors import Weights, memory_search_ranked, memory_text_match

    vector = np.random.default_rng(3).normal(size=settings.THALAMUS_EMBED_DIM)
    vector = (vector / np.linalg.norm(vector)).tolist()

    def search() -> None:
        match = memory_text_match(
            user_id=user.pk,
            text="where do my bees live",
            limit=8,
            weights=Weights.from_config(RuntimeConfig()),
        )
        for _ in range(3):
            memory_search_ranked(match, vector=vector)

    search()
    assert any("embedding_half <=>" in text for text in _prepared())  # the exact scan
    # Past the exact scan's limit, the approximate one.
    monkeypatch.setattr(search_selectors, "EXACT_SCAN_MAX_ROWS", -1)
    search()
    assert not any("ORDER BY embedding <=>" in text for text in _prepared())
    assert any("ORDER BY embedding <=>" in query["sql"] for query in _logged(search))


def _logged(run) -> list[dict]:
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        run()
    return captured.captured_queries
