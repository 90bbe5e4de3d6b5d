from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from apps.memory import services as memory_services
from apps.memory import tasks as memory_tasks
from apps.memory.models import Critique, MemoryLink, MemoryNode
from tests.cognition.conftest import wait_for


def _node(owner, description, *, state="volatile", score=1, source="admin", **extra) -> MemoryNode:
    node = memory_services.memory_node_create(
        owner=owner, description=description, source=source, **extra
    )
    MemoryNode.objects.filter(pk=node.pk).update(state=state, confidence_score=score)
    node.refresh_from_db()
    return node


@pytest.mark.parametrize(
    ("later", "source", "replaced"),
    [
        ("The user's name is Eve", MemoryNode.Source.INFERRED, False),
        ("The user's name is Nina", MemoryNode.Source.USER, True),
    ],
)
def test_only_the_users_later_words_replace_their_own_words_on_promotion(
    user, turn, config, later, source, replaced
):
    config(promotion_threshold=3, minimum_score=1, batch_size=50)
    said = turn("My name is Nora", "Hello Nora.")
    nora = _node(
        user,
        "The user's name is Nora",
        state="promoted",
        score=4,
        source=MemoryNode.Source.USER,
        quote="My name is Nora",
        source_message=said,
    )
    words = later.replace("The user's", "My")
    candidate = _node(
        user, later, score=3, source=source, quote=words, source_message=turn(words, "Hi.")
    )
    Critique.objects.create(
        node=candidate, owner=user, verdict="withstands", debate="d", delta=1, contradicts=[nora.pk]
    )

    memory_tasks.promote_and_link()

    nora.refresh_from_db()
    assert (nora.valid_to is not None) is replaced
    assert nora.superseded_by_id == (candidate.pk if replaced else None)
    link = (candidate.pk, nora.pk, "contradicts")
    assert link in set(MemoryLink.objects.values_list("source_id", "target_id", "kind"))


def test_promotion_links_supersedes_the_contradicted_fact_and_merges_duplicates(
    celery_worker, user, other_user, config
):
    config(promotion_threshold=3, minimum_score=1, batch_size=50)
    milan = _node(user, "The user lives in Milan", state="promoted", score=4)
    espresso = _node(user, "The user loves espresso", state="promoted", score=4)
    rex = _node(user, "The user has a dog named Rex", state="promoted", score=3)
    turin = _node(user, "The user lives in Turin", score=3)
    coffee = _node(user, "The user loves espresso coffee", score=5)
    # A duplicate stored before write-time merging (memory_node_create now confirms rex
    # instead): made as another text, then given rex's words and vector.
    dog = _node(user, "The user once had a cat", score=3)
    MemoryNode.objects.filter(pk=dog.pk).update(
        description="the user has a dog named rex", embedding=rex.embedding
    )
    doubtful = _node(user, "The user lives in Naples", score=2)
    theirs = _node(other_user, "The user lives in Milan", score=3)
    Critique.objects.create(
        node=turin, owner=user, verdict="withstands", debate="d", delta=1, contradicts=[milan.pk]
    )

    promoted = memory_tasks.promote_and_link.delay().get(timeout=45)

    states = dict(MemoryNode.objects.filter(valid_to=None).values_list("pk", "state"))
    assert promoted == 4
    assert states[turin.pk] == states[coffee.pk] == states[theirs.pk] == "promoted"
    assert states[doubtful.pk] == "volatile"
    milan.refresh_from_db()
    assert milan.valid_to is not None and milan.superseded_by_id == turin.pk
    dog.refresh_from_db()
    rex.refresh_from_db()
    assert dog.valid_to is not None and dog.superseded_by_id == rex.pk
    assert rex.confidence_score == 4
    links = set(MemoryLink.objects.values_list("source_id", "target_id", "kind"))
    assert (turin.pk, milan.pk, "contradicts") in links
    assert (coffee.pk, espresso.pk, "similar") in links
    assert not any(theirs.pk in (source, target) for source, target, _ in links)
    kinds = set(user.events.values_list("kind", flat=True))
    assert {"promotion", "link"} <= kinds

    assert memory_tasks.promote_and_link.delay().get(timeout=45) == 0


def test_decay_deletes_only_stale_unconfirmed_volatile_nodes_and_spares_one_touched_meanwhile(
    celery_worker, user, config
):
    config(decay_hours=24, minimum_score=1, promotion_threshold=3)
    long_ago = timezone.now() - timedelta(hours=48)

    def aged(description, **extra):
        node = _node(user, description, **extra)
        MemoryNode.objects.filter(pk=node.pk).update(created_at=long_ago, last_accessed_at=None)
        return node

    stale = aged("stale and doubted", score=0)
    promoted = aged("stale but long-term", state="promoted", score=0)
    confirmed = aged("stale but confirmed", score=2)
    fresh = _node(user, "recent and doubted", score=0)
    touched = aged("touched while decay runs", score=0)
    critiqued = aged("critiqued, then stale", score=0)
    Critique.objects.create(node=critiqued, owner=user, verdict="fails", debate="d", delta=-1)

    with transaction.atomic():
        memory_services.memory_nodes_mark_accessed(node_ids=[touched.pk])
        result = memory_tasks.decay.delay()
        # The DELETE must be running and waiting on the touched row before we commit.
        wait_for(lambda: _a_delete_waits_on_a_lock())
    deleted = result.get(timeout=45)

    assert deleted == 2
    remaining = set(MemoryNode.objects.values_list("pk", flat=True))
    assert remaining == {promoted.pk, confirmed.pk, fresh.pk, touched.pk}
    assert stale.pk not in remaining and critiqued.pk not in remaining
    event = user.events.get(kind="decay")
    assert event.payload["deleted"] == 2


def _a_delete_waits_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        # Activity statistics are a snapshot per transaction; this test holds one open.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE %s",
            ["%DELETE FROM memory_memorynode%"],
        )
        return cursor.fetchone()[0] > 0
