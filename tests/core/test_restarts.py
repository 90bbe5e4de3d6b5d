"""The site survives its servers restarting under it: real processes, real restarts.

Each test restarts a private embedded server (tests/private_servers.py), never the one the
other test processes share.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from apps.chat.models import Conversation
from apps.memory import tasks as memory_tasks
from tests.private_servers import (
    chat_turn,
    database_url,
    logged_in_client,
    private_postgres,
    web_server,
    worker_process,
)

PASSWORD = "correct-horse-battery-9"
PAGES = ["/c/", "/memory/", "/memory/knowledge", "/dashboard/", "/"]


@pytest.mark.django_db(transaction=True)
def test_every_request_and_turn_after_a_fast_postgresql_restart_succeeds(user, settings, llm_stub):
    conversation = Conversation.objects.create(owner=user, title="Before the restart")
    conversations = [Conversation.objects.create(owner=user) for _ in range(3)]
    with (
        private_postgres() as postgres,
        web_server(database=database_url(postgres), redis=settings.REDIS_URL) as url,
    ):
        client = logged_in_client(url, user.username, PASSWORD)
        pages = [*PAGES, f"/c/{conversation.pk}/"]

        def visit(page: str) -> int:
            return client.get(page).status_code

        def turn(n: int) -> str:
            return chat_turn(url, client, conversations[n].pk, f"message {n}")

        def three_turns(n: int) -> list[str]:
            # One thread a conversation: a page that waits for its answer where another page's
            # answer ends would take that frame for its own, and send its next message while
            # its own answer still holds one of the user's three stream slots.
            return [turn(n) for _ in range(3)]

        # Every worker thread of the server holds a database connection now.
        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(visit, pages * 8)) == {200}
        # At most three answers are written at once for one user (the abuse limits).
        with ThreadPoolExecutor(3) as pool:
            before = list(pool.map(turn, range(3)))

        postgres.stop()  # pg_ctl -m fast: every session is ended
        postgres.start()

        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(visit, pages * 8))
        with ThreadPoolExecutor(3) as pool:
            after = [frame for frames in pool.map(three_turns, range(3)) for frame in frames]
        new = client.post(
            "/c/new",
            headers={"X-CSRFToken": client.cookies["csrftoken"], "Referer": url},
            follow_redirects=True,
        )
        client.close()
    assert [s for s in statuses if s != 200] == []
    assert new.status_code == 200
    assert [frame for frame in before if "msg-assistant complete" not in frame] == []
    assert [frame for frame in after if "msg-assistant complete" not in frame] == []


@pytest.mark.django_db(transaction=True)
def test_a_workers_tasks_after_a_fast_postgresql_restart_succeed(settings):
    """A worker keeps its database connection between tasks (thalamus_site/celery.py); after a
    restart its next task pings it, finds it gone and connects again, at the first attempt
    (promote_and_link is not retried on an error)."""
    with (
        private_postgres() as postgres,
        worker_process(redis=settings.REDIS_URL, database=database_url(postgres)),
    ):
        assert memory_tasks.promote_and_link.delay().get(timeout=60) == 0
        postgres.stop()  # pg_ctl -m fast: the worker's session is ended
        postgres.start()
        results = [memory_tasks.promote_and_link.delay().get(timeout=45) for _ in range(3)]
    assert results == [0, 0, 0]
