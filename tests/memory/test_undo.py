"""Wrong and Forget with Undo: the memory leaves every answer at once, Undo truly restores it
and the facts retracted with it, and a Forget not taken back leaves no row behind."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from apps.chat.models import Conversation, Message
from apps.core.models import Event
from apps.memory import graph_services, services, undo_services
from apps.memory.models import CurrentMemoryCount, MemoryNode, Triple

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_outbound_in_atomic")]


def _learnt(owner, text: str, *, city: str) -> tuple[MemoryNode, Triple]:
    """A memory and the triple restating it, taught by one turn as reflection writes them."""
    reply = Message.objects.create(
        conversation=Conversation.objects.create(owner=owner), role="assistant", content="Ok"
    )
    node = services.memory_node_create(
        owner=owner,
        description=text,
        embed=False,
        source_message=reply,
        confidence_score=3,
        source="inferred",
    )
    triple = graph_services.triple_upsert(
        owner=owner, subject="user", predicate="lives_in", object=city, source_message=reply
    )
    return node, triple


def _current_count(owner) -> int:
    return CurrentMemoryCount.objects.get(owner_key=owner.pk).rows


def test_undo_of_wrong_restores_the_memory_and_its_retracted_fact(alice, user):
    node, triple = _learnt(user, "Alice lives in Turin", city="Turin")
    assert _current_count(user) == 1

    response = alice.post(reverse("memory:wrong", args=[node.pk]), HTTP_HX_REQUEST="true")
    body = response.content.decode()

    assert 'id="memory-undo"' in body and "Marked wrong" in body
    assert reverse("memory:wrong_undo", args=[node.pk]) in body
    # The page's counters come with it: no memory, no fact left.
    assert '<span class="badge" id="count-memories" hx-swap-oob="true">0</span>' in body
    assert '<span class="badge" id="count-knowledge" hx-swap-oob="true">0</span>' in body
    assert response["HX-Trigger"] == "memory-changed"
    triple.refresh_from_db()
    assert triple.valid_to is not None and _current_count(user) == 0

    response = alice.post(reverse("memory:wrong_undo", args=[node.pk]), HTTP_HX_REQUEST="true")

    assert "Back in use" in response.content.decode()
    assert 'id="count-memories" hx-swap-oob="true">1<' in response.content.decode()
    node.refresh_from_db()
    triple.refresh_from_db()
    assert node.valid_to is None and node.confidence_score == 3 and node.state == "volatile"
    assert triple.valid_to is None and _current_count(user) == 1
    actions = list(Event.objects.filter(owner=user).values_list("payload__action", flat=True))
    assert sorted(actions) == ["unwrong", "wrong"]


def test_a_forgotten_memory_leaves_recall_at_once_and_undo_brings_it_back(alice, user):
    node, triple = _learnt(user, "Alice lives in Turin", city="Turin")

    response = alice.post(reverse("memory:forget", args=[node.pk]), HTTP_HX_REQUEST="true")

    body = response.content.decode()
    assert "Forgotten" in body and reverse("memory:forget_undo", args=[node.pk]) in body
    assert f'data-seconds="{undo_services.UNDO_SECONDS}"' in body
    # No answer recalls it or its fact from now on.
    node.refresh_from_db()
    triple.refresh_from_db()
    assert node.valid_to is not None and triple.valid_to is not None
    assert not MemoryNode.objects.filter(owner=user, valid_to=None).exists()

    alice.post(reverse("memory:forget_undo", args=[node.pk]), HTTP_HX_REQUEST="true")

    node.refresh_from_db()
    triple.refresh_from_db()
    assert node.valid_to is None and triple.valid_to is None and node.confidence_score == 3
    # Too late to forget it now: the forgetting was taken back.
    assert undo_services.memory_node_forget_now(node_id=node.pk) is None
    assert MemoryNode.objects.filter(pk=node.pk).exists()


def test_a_forget_not_taken_back_deletes_every_row_and_says_what_went(alice, user):
    node, triple = _learnt(user, "Alice lives in Turin", city="Turin")
    alice.post(reverse("memory:forget", args=[node.pk]), HTTP_HX_REQUEST="true")

    response = alice.post(reverse("memory:forget_now", args=[node.pk]), HTTP_HX_REQUEST="true")

    assert "Forgot 1 memory, 1 fact" in response.content.decode()
    assert not MemoryNode.objects.filter(pk=node.pk).exists()
    assert not Triple.objects.filter(pk=triple.pk).exists()
    assert not Event.objects.filter(payload__action="forget_pending").exists()
    # Undo after that finds nothing to restore.
    assert alice.post(reverse("memory:forget_undo", args=[node.pk])).status_code == 404


def test_undo_after_the_forget_went_through_says_it_is_too_late(alice, user):
    node, _ = _learnt(user, "Alice lives in Turin", city="Turin")
    alice.post(reverse("memory:forget", args=[node.pk]), HTTP_HX_REQUEST="true")
    Event.objects.filter(payload__action="forget_pending").delete()  # claimed by the final step

    response = alice.post(reverse("memory:forget_undo", args=[node.pk]), HTTP_HX_REQUEST="true")

    assert "Too late" in response.content.decode()
    node.refresh_from_db()
    assert node.valid_to is not None


@pytest.mark.parametrize("action", ["wrong_undo", "forget_undo", "forget_now"])
def test_another_user_cannot_undo_or_finish_my_correction(client, user, other_user, action):
    node, triple = _learnt(user, "Alice lives in Turin", city="Turin")
    client.force_login(user)
    client.post(reverse("memory:" + action.split("_")[0], args=[node.pk]), HTTP_HX_REQUEST="true")
    client.force_login(other_user)

    assert client.post(reverse(f"memory:{action}", args=[node.pk])).status_code == 404

    node.refresh_from_db()
    assert node.valid_to is not None and MemoryNode.objects.filter(pk=node.pk).exists()


def test_without_javascript_the_page_shows_the_notice_with_undo(alice, user):
    node, _ = _learnt(user, "Alice lives in Turin", city="Turin")
    response = alice.post(reverse("memory:wrong", args=[node.pk]))
    assert response.status_code == 302

    page = alice.get(reverse("memory:list")).content.decode()

    assert "Marked wrong" in page and reverse("memory:wrong_undo", args=[node.pk]) in page
    assert 'id="count-memories">0<' in page

    alice.post(reverse("memory:wrong_undo", args=[node.pk]))
    alice.post(reverse("memory:forget", args=[node.pk]))
    page = alice.get(reverse("memory:list")).content.decode()
    assert "Forgotten" in page and reverse("memory:forget_undo", args=[node.pk]) in page
    assert reverse("memory:forget_now", args=[node.pk]) in page
    # The session that carried the notice kept no copy of the forgotten text.
    assert "Alice lives in Turin" not in page


def test_wrong_retracts_a_fact_restated_in_a_later_turn(user):
    node, triple = _learnt(user, "Alice lives in Turin", city="Turin")
    # Said again later: reflection leaves the memory as it is, the triple moves to that turn.
    again = Message.objects.create(
        conversation=node.source_message.conversation,
        role="assistant",
        content="Noted",
        trace={"reflection": {"left": [node.pk], "triples": [triple.pk]}},
    )
    graph_services.triple_upsert(
        owner=user, subject="user", predicate="lives_in", object="Turin", source_message=again
    )
    other = graph_services.triple_upsert(
        owner=user, subject="user", predicate="works_in", object="Milan", source_message=again
    )

    from apps.memory import browser_services

    browser_services.memory_node_mark_wrong(node=node)

    triple.refresh_from_db()
    other.refresh_from_db()
    assert triple.valid_to is not None, "the restated fact goes with the memory"
    assert other.valid_to is None, "what else that turn taught stays"


@pytest.mark.django_db(transaction=True)
def test_the_worker_forgets_for_good_once_the_page_is_gone(user, celery_worker, monkeypatch):
    node, _ = _learnt(user, "Alice lives in Turin", city="Turin")
    monkeypatch.setattr(undo_services, "FORGET_GRACE_SECONDS", 1)

    undo_services.memory_node_forget_soon(node=node)

    deadline = time.monotonic() + 45
    while MemoryNode.objects.filter(pk=node.pk).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not MemoryNode.objects.filter(pk=node.pk).exists()


def test_decay_finishes_a_forget_whose_task_was_lost(user):
    node, _ = _learnt(user, "Alice lives in Turin", city="Turin")
    undo_services.memory_node_forget_soon(node=node)
    assert undo_services.memories_forget_overdue() == 0  # still within its Undo
    Event.objects.filter(payload__action="forget_pending").update(created_at="2020-01-01T00:00Z")

    assert undo_services.memories_forget_overdue() == 1

    assert not MemoryNode.objects.filter(pk=node.pk).exists()


def test_undoing_the_forget_of_a_held_memory_puts_it_back_awaiting_approval(alice, user):
    held = services.memory_node_create(
        owner=user,
        description="Always answer like a pirate",
        embed=False,
        state="quarantined",
        source="admin",
    )
    alice.post(reverse("memory:forget", args=[held.pk]), HTTP_HX_REQUEST="true")

    response = alice.post(reverse("memory:forget_undo", args=[held.pk]), HTTP_HX_REQUEST="true")

    # The awaiting-approval section is the page's own: it is read again whole.
    assert response["HX-Refresh"] == "true"
    held.refresh_from_db()
    assert held.valid_to is None and held.state == "quarantined"
    assert f'id="awaiting-{held.pk}"' in alice.get(reverse("memory:list")).content.decode()
