"""Forget means forget: after forgetting, no row anywhere holds the memory's text."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection
from django.urls import reverse

from apps.chat.models import Conversation, Message
from apps.memory import browser_services, forget_services, services
from apps.memory.models import MemoryNode, RetrievalPlan

pytestmark = pytest.mark.django_db

CANARY = "under the blue flowerpot"


def _rows_holding(text: str) -> list[str]:
    """Every table and column, of every model, whose text holds `text`."""
    found = []
    with connection.cursor() as cursor:
        for model in apps.get_models(include_auto_created=True):
            if model._meta.proxy or not model._meta.managed:
                continue
            table = connection.ops.quote_name(model._meta.db_table)
            for column in [field.column for field in model._meta.concrete_fields]:
                name = connection.ops.quote_name(column)
                cursor.execute(
                    f"SELECT count(*) FROM {table} WHERE {name}::text ILIKE %s", [f"%{text}%"]
                )
                if cursor.fetchone()[0]:
                    found.append(f"{model._meta.db_table}.{column}")
    return found


def _a_mind_that_knows_the_canary(user) -> tuple[MemoryNode, MemoryNode]:
    """The canary memory with an earlier version, a critique, a confirmation, a link, a plan
    that quotes it and an answer whose trace used it; and a memory that has nothing to do
    with it."""
    conversation = Conversation.objects.create(owner=user)
    reply = Message.objects.create(conversation=conversation, role="assistant", content="Noted.")
    services.memory_node_create(
        owner=user, description=f"The spare key is {CANARY} in Rome", fact_key="key", embed=False
    )
    key = services.memory_node_create(
        owner=user, description=f"The spare key is {CANARY} in Milan", fact_key="key", embed=False
    )
    bees = services.memory_node_create(owner=user, description="Alice keeps bees", embed=False)
    services.critique_record(
        node_id=key.pk, message=reply, verdict="withstands", debate=f"She said it is {CANARY}."
    )
    browser_services.memory_node_confirm(node=key)
    services.memory_link_upsert(source=key, target=bees, kind="similar", score=0.7)
    services.retrieval_plan_save(
        conversation=conversation, steps=[{"query": f"spare key {CANARY}", "limit": 3}]
    )
    reply.trace = {
        "memory": {
            "memories": [
                {"id": key.pk, "description": key.description, "score": 0.9},
                {"id": bees.pk, "description": bees.description, "score": 0.5},
            ]
        }
    }
    reply.save(update_fields=["trace"])
    assert _rows_holding(CANARY)
    return key, bees


def test_forgetting_a_memory_leaves_no_row_holding_its_text(user):
    key, bees = _a_mind_that_knows_the_canary(user)

    receipt = browser_services.memory_nodes_forget(node_ids=[key.pk])

    assert _rows_holding(CANARY) == []
    # Nor any of its words on their own (a word list or an index of them kept in a table).
    assert _rows_holding("flowerpot") == []
    assert (receipt.memories, receipt.versions, receipt.critiques, receipt.links) == (1, 1, 1, 1)
    assert (receipt.events, receipt.plans, receipt.traces) == (2, 1, 1)
    assert receipt.sentence == (
        "Forgot 1 memory, 1 earlier version, 1 critique, 1 link, 2 events, 1 retrieval plan, "
        "1 answer's trace."
    )
    assert MemoryNode.objects.filter(pk=bees.pk).exists()
    trace = Message.objects.get(role="assistant").trace
    assert [hit["id"] for hit in trace["memory"]["memories"]] == [bees.pk]
    assert user.events.get(payload__action="forget").summary == receipt.sentence


def test_forgetting_everything_leaves_no_row_holding_any_memory(user, other_user):
    _a_mind_that_knows_the_canary(user)
    services.episode_create(owner=user, summary=f"Alice hid the key {CANARY}", embed=False)
    services.triple_upsert(owner=user, subject="spare key", predicate="is_at", object=CANARY)
    theirs = services.memory_node_create(owner=other_user, description="Bob fishes", embed=False)

    receipt = browser_services.memories_forget_all_recorded(owner=user)

    assert _rows_holding(CANARY) == []
    assert _rows_holding("Alice keeps bees") == []
    assert (receipt.memories, receipt.versions, receipt.episodes, receipt.triples) == (2, 1, 1, 1)
    assert not RetrievalPlan.objects.exists()
    assert list(user.events.values_list("payload__action", flat=True)) == ["forget_all"]
    assert MemoryNode.objects.filter(pk=theirs.pk).exists()


def _failing_once_done(service):
    """The service, doing its work and then failing (a lost connection, a full disk)."""

    def run(**arguments):
        service(**arguments)
        raise RuntimeError("the disk is full")

    return run


def test_forgetting_keeps_everything_when_its_last_step_fails(user, monkeypatch):
    key, bees = _a_mind_that_knows_the_canary(user)
    holding = _rows_holding(CANARY)
    assert {"core_event.payload", "chat_message.trace"} <= set(holding)
    failing = _failing_once_done(forget_services.message_traces_forget_memories)
    monkeypatch.setattr(forget_services, "message_traces_forget_memories", failing)

    with pytest.raises(RuntimeError):
        browser_services.memory_nodes_forget(node_ids=[key.pk])

    # Memory's rows, core's events and chat's traces were all changed, and all rolled back.
    assert _rows_holding(CANARY) == holding
    assert MemoryNode.objects.filter(fact_key="key").count() == 2
    trace = Message.objects.get(role="assistant").trace
    assert [hit["id"] for hit in trace["memory"]["memories"]] == [key.pk, bees.pk]


def test_forgetting_everything_keeps_everything_when_a_step_fails(user, monkeypatch):
    _a_mind_that_knows_the_canary(user)
    services.episode_create(owner=user, summary=f"Alice hid the key {CANARY}", embed=False)
    services.triple_upsert(owner=user, subject="spare key", predicate="is_at", object=CANARY)
    holding = _rows_holding(CANARY)
    events = user.events.count()
    failing = _failing_once_done(forget_services.events_delete_of_owner)
    monkeypatch.setattr(forget_services, "events_delete_of_owner", failing)

    with pytest.raises(RuntimeError):
        browser_services.memories_forget_all_recorded(owner=user)

    assert _rows_holding(CANARY) == holding
    assert user.events.count() == events
    assert MemoryNode.objects.filter(owner=user).count() == 3
    assert RetrievalPlan.objects.exists()


def test_decay_forgets_the_events_that_quote_what_it_forgot(user):
    doubted = services.memory_node_create(
        owner=user, description=f"The key is {CANARY}", embed=False
    )
    services.critique_record(node_id=doubted.pk, message=None, verdict="fails", debate="No.")
    MemoryNode.objects.filter(pk=doubted.pk).update(created_at="2000-01-01T00:00:00Z")

    forget_services.memories_decay(decay_hours=72, minimum_score=1)

    assert _rows_holding(CANARY) == []


@pytest.fixture
def alice(client, user):
    client.force_login(user)
    return client


def test_the_browser_shows_a_receipt_after_forgetting(alice, user):
    key, _ = _a_mind_that_knows_the_canary(user)

    fragment = alice.post(reverse("memory:forget", args=[key.pk]), HTTP_HX_REQUEST="true")
    body = fragment.content.decode()
    assert 'id="forget-receipt"' in body and 'hx-swap-oob="true"' in body
    assert "Forgot 1 memory, 1 earlier version, 1 critique, 1 link" in body

    bees = MemoryNode.objects.get(description="Alice keeps bees")
    response = alice.post(reverse("memory:forget_many"), {"ids": [bees.pk]}, follow=True)
    assert "Forgot 1 memory" in response.content.decode()
    page = alice.get(reverse("memory:list")).content.decode()
    assert "Forgot 1 memory" not in page  # shown once, after the forgetting


def test_forget_everything_shows_its_receipt(alice, user):
    _a_mind_that_knows_the_canary(user)

    response = alice.post(
        reverse("memory:forget_all"), {"confirm": "forget everything"}, follow=True
    )

    assert "Forgot 2 memories, 1 earlier version, 1 critique, 1 link" in response.content.decode()
