"""A worker keeps its database connection from one task to the next (thalamus_site/celery.py):
with Celery's default it opened a PostgreSQL backend for every task."""

from __future__ import annotations

import psycopg
import pytest

from apps.memory import tasks as memory_tasks
from tests.private_servers import database_url, private_postgres, worker_process

pytestmark = pytest.mark.django_db(transaction=True)


def _worker_backends(url: str) -> set[tuple]:
    """Every client session of the private server but this one: the worker's."""
    with psycopg.connect(url, autocommit=True) as probe:
        return set(
            probe.execute(
                """
                SELECT pid, backend_start FROM pg_stat_activity
                 WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'
                """
            ).fetchall()
        )


def test_a_worker_keeps_its_database_connection_from_one_task_to_the_next(settings):
    with private_postgres() as postgres:
        url = database_url(postgres)
        with worker_process(redis=settings.REDIS_URL, database=url):
            memory_tasks.promote_and_link.delay().get(timeout=60)
            after_one = _worker_backends(url)
            for _ in range(3):
                memory_tasks.promote_and_link.delay().get(timeout=45)
            after_four = _worker_backends(url)

    assert after_one, "no connection was left open after the task"
    assert after_four == after_one
