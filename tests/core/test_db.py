"""Parameters of the hot path's statements: a query vector bound as a binary real[]."""

from __future__ import annotations

import numpy as np
import pytest
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
