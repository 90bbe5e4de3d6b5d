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


def test_a_hot_statement_asked_to_be_is_prepared_once_on_its_connection(user):
    sql = "SELECT %(a)s::int + %(b)s::int"
    assert [fetch_hot(sql, {"a": n, "b": 1}, prepare=True) for n in (1, 2, 3)] == [
        [(2,)],
        [(3,)],
        [(4,)],
    ]
    assert [text for text in _prepared() if "$1::int + $2::int" in text] == [
        "SELECT $1::int + $2::int"
    ]


@pytest.mark.parametrize("many_rows", [False, True], ids=["few rows", "many rows"])
def test_a_memory_search_is_prepared_only_for_an_owner_with_few_rows(user, monkeypatch, many_rows):
    """An owner with fewer than FORM_LOOKUP_MIN_ROWS visible rows has both statements of a
    search prepared: planning was most of their time. A bigger owner's are planned for their
    parameters every time: prepared, the plans PostgreSQL settled on cost a user with 10,000
    memories 45 ms a turn, and a generic plan's HNSW scan lost most of its recall
    (apps.core.db.fetch_hot). The count of the owner's rows, which chooses, is prepared, and so
    is the episode search, which reads all of an owner's episodes whatever its plan."""
    from apps.core.models import RuntimeConfig
    from apps.memory import search_selectors
    from apps.memory.episode_selectors import episode_search
    from apps.memory.search_selectors import Weights, memory_search_ranked, memory_text_match

    if many_rows:
        monkeypatch.setattr(search_selectors, "FORM_LOOKUP_MIN_ROWS", 0)
    vector = np.random.default_rng(3).normal(size=settings.THALAMUS_EMBED_DIM)
    for _ in range(3):
        match = memory_text_match(
            user_id=user.pk,
            text="where do my bees live",
            limit=8,
            weights=Weights.from_config(RuntimeConfig()),
        )
        memory_search_ranked(match, vector=(vector / np.linalg.norm(vector)).tolist())
        episode_search(user_id=user.pk, text="where do my bees live", vector=None, limit=3)
    prepared = _prepared()
    assert any("memory_currentmemorycount" in text for text in prepared)
    assert any("memory_episode" in text for text in prepared)
    searches = [
        text
        for text in prepared
        if ("stemmed" in text or "<=>" in text) and "memory_episode" not in text
    ]
    if many_rows:
        assert searches == []
    else:
        assert len(searches) == 2
        assert all(text.startswith(search_selectors.FEW_ROWS_MARK) for text in searches)
