"""Forget means forget: after forgetting, no row anywhere holds the memory's text."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection
from django.urls import reverse

from apps.chat.models import Conversation, Message
from apps.cognition.debate import debate_record
from apps.core.models import Event
from apps.core.services import event_record
from apps.memory import (
    browser_services,
    critique_services,
    episode_services,
    forget_services,
    graph_services,
    services,
)
from apps.memory.models import Episode, MemoryNode, RetrievalPlan, Triple

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_outbound_in_atomic")]

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
    """The canary memory, learnt from a turn, with an earlier version, a critique, a
    confirmation, a link, a plan that paraphrases it, the triple and the episode its turn
    taught, an event of each kind that quotes or names it, and an answer whose trace used it,
    quoted it in its note, paraphrased it in its plan's steps and debated a draft restating
    it; and a memory, a fact of the same turn, an episode and an answer that have nothing to
    do with it."""
    conversation = Conversation.objects.create(owner=user)
    question = Message.objects.create(
        conversation=conversation, role="user", content="Where did I leave the spare key?"
    )
    reply = Message.objects.create(
        conversation=conversation, role="assistant", content="Noted.", reply_to=question
    )
    services.memory_node_create(
        owner=user,
        description=f"The spare key is {CANARY} in Rome",
        fact_key="key",
        embed=False,
        source="admin",
    )
    key = services.memory_node_create(
        owner=user,
        description=f"The spare key is {CANARY} in Milan",
        fact_key="key",
        source_message=reply,
        quote=f"I moved the spare key {CANARY} in Milan",
        embed=False,
        source="inferred",
    )
    bees = services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    critique_services.critique_record(
        node_id=key.pk, message=reply, verdict="withstands", debate=f"She said it is {CANARY}."
    )
    browser_services.memory_node_confirm(node=key)
    services.memory_link_upsert(source=key, target=bees, kind="similar", score=0.7)
    services.retrieval_plan_save(
        conversation=conversation, steps=[{"query": "which flowerpot hides the key", "limit": 3}]
    )
    # What the turn taught besides the memory: the fact restating it, a fact it does not
    # restate, and the episode of its stretch.
    where = graph_services.triple_upsert(
        owner=user,
        subject="user",
        predicate="keeps_key",
        object=f"{CANARY} in Milan",
        source_message=reply,
    )
    keeps = graph_services.triple_upsert(
        owner=user, subject="user", predicate="keeps", object="bees", source_message=reply
    )
    hid = episode_services.episode_create(
        owner=user,
        summary=f"Alice moved the spare key {CANARY}",
        conversation=conversation,
        messages=[question, reply],
        embed=False,
    )
    hives = episode_services.episode_create(
        owner=user, summary="Alice built two hives", embed=False
    )
    event_record(
        kind=Event.Kind.EPISODE,
        owner=user,
        summary=f"remembered an episode: {hid.summary}",
        payload={"episode_id": hid.pk, "conversation_id": conversation.pk, "messages": 2},
    )
    event_record(
        kind=Event.Kind.PERCEPTION,
        owner=user,
        summary="reflected on a turn: 1 new, 0 updated, 0 unchanged, 1 rejected memories",
        payload={
            "message_id": reply.pk,
            "created": [key.pk],
            "rejected": [{"text": "the key is under a flowerpot", "reason": "not said"}],
            "triples": [where.pk, keeps.pk],
        },
    )
    review = {
        "verdict": "rewrite",
        "violations": ["Never say aloud which flowerpot hides the key"],
        "critique": "The draft names the flowerpot.",
    }
    debate = {"rules": 1, "timings_ms": {"draft": 1.0}, "draft": "The blue flowerpot, in Milan."}
    debate_record(
        owner=user,
        reply_id=reply.pk,
        conversation_id=conversation.pk,
        debate={**debate, "review": review, "rewritten": True},
    )
    reply.trace = {
        "memory": {
            "plan": {"source": "plan", "steps": [{"query": "which flowerpot hides the key"}]},
            "memories": [{"id": key.pk, "score": 0.9}, {"id": bees.pk, "score": 0.5}],
            "triples": [{"id": where.pk}, {"id": keeps.pk}],
            "episodes": [{"id": hid.pk, "score": 0.4}, {"id": hives.pk, "score": 0.3}],
        },
        "note": {
            "text": f"<memory>\n- The spare key is {CANARY} in Milan\n</memory>",
            "memories": [key.pk, bees.pk],
            "triples": [where.pk],
            "episodes": [],
        },
        "debate": {**debate, "review": review, "rewritten": True},
        "reflection": {
            "created": [key.pk],
            "rejected": [{"text": "the key is under a flowerpot", "reason": "not said"}],
        },
    }
    reply.save(update_fields=["trace"])
    # An answer that used only the bees: its note quotes nothing forgotten.
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="Bees it is.",
        trace={
            "memory": {"memories": [{"id": bees.pk, "score": 0.8}]},
            "note": {"text": "<memory>\n- Alice keeps bees\n</memory>", "memories": [bees.pk]},
        },
    )
    assert _rows_holding(CANARY)
    return key, bees


def test_forgetting_a_memory_leaves_no_row_holding_its_text(user):
    key, bees = _a_mind_that_knows_the_canary(user)

    receipt = browser_services.memory_nodes_forget(node_ids=[key.pk])

    assert _rows_holding(CANARY) == []
    # Nor any of its words on their own (a word list or an index of them kept in a table), nor
    # what paraphrases it: the plan's queries, the debate's draft and review, the reflection's
    # rejected quotes.
    assert _rows_holding("flowerpot") == []
    assert (receipt.memories, receipt.versions, receipt.critiques, receipt.links) == (1, 1, 1, 1)
    assert (receipt.triples, receipt.episodes) == (1, 1)
    assert (receipt.events, receipt.plans, receipt.traces) == (5, 1, 1)
    assert receipt.sentence == (
        "Forgot 1 memory, 1 earlier version, 1 critique, 1 link, 1 episode, 1 fact, 5 events, "
        "1 retrieval plan, 1 answer's trace."
    )
    assert MemoryNode.objects.filter(pk=bees.pk).exists()
    # The turn's other fact and the other episode stay, as does every answer.
    assert list(Triple.objects.values_list("object", flat=True)) == ["bees"]
    assert list(Episode.objects.values_list("summary", flat=True)) == ["Alice built two hives"]
    used, bees_only = Message.objects.filter(role="assistant").order_by("pk")
    assert [hit["id"] for hit in used.trace["memory"]["memories"]] == [bees.pk]
    assert [hit["id"] for hit in used.trace["memory"]["triples"]] == [Triple.objects.get().pk]
    assert [hit["id"] for hit in used.trace["memory"]["episodes"]] == [Episode.objects.get().pk]
    assert "note" not in used.trace
    assert used.trace["memory"]["plan"] == {"source": "plan", "steps": []}
    assert used.trace["debate"] == {"rules": 1, "timings_ms": {"draft": 1.0}, "rewritten": True}
    assert used.trace["reflection"]["rejected"] == []
    assert bees_only.trace["note"]["memories"] == [bees.pk]
    assert user.events.get(payload__action="forget").summary == receipt.sentence


def test_forgetting_everything_leaves_no_row_holding_any_memory(user, other_user):
    _a_mind_that_knows_the_canary(user)
    episode_services.episode_create(owner=user, summary=f"Alice hid the key {CANARY}", embed=False)
    graph_services.triple_upsert(owner=user, subject="spare key", predicate="is_at", object=CANARY)
    theirs = services.memory_node_create(
        owner=other_user, description="Bob fishes", embed=False, source="admin"
    )

    receipt = browser_services.memories_forget_all_recorded(owner=user)

    assert _rows_holding(CANARY) == []
    assert _rows_holding("flowerpot") == []
    assert _rows_holding("Alice keeps bees") == []
    assert (receipt.memories, receipt.versions, receipt.episodes, receipt.triples) == (2, 1, 3, 3)
    assert not RetrievalPlan.objects.exists()
    used = Message.objects.filter(role="assistant").order_by("pk").first()
    assert used.trace["memory"]["plan"]["steps"] == []
    assert "draft" not in used.trace["debate"] and "review" not in used.trace["debate"]
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
    failing = _failing_once_done(forget_services.message_traces_forget)
    monkeypatch.setattr(forget_services, "message_traces_forget", failing)

    with pytest.raises(RuntimeError):
        browser_services.memory_nodes_forget(node_ids=[key.pk])

    # Memory's rows, core's events and chat's traces were all changed, and all rolled back.
    assert _rows_holding(CANARY) == holding
    assert MemoryNode.objects.filter(fact_key="key").count() == 2
    assert (Triple.objects.count(), Episode.objects.count()) == (2, 2)
    trace = Message.objects.filter(role="assistant").order_by("pk").first().trace
    assert [hit["id"] for hit in trace["memory"]["memories"]] == [key.pk, bees.pk]
    assert trace["debate"]["draft"] and trace["note"]


def test_forgetting_everything_keeps_everything_when_a_step_fails(user, monkeypatch):
    _a_mind_that_knows_the_canary(user)
    episode_services.episode_create(owner=user, summary=f"Alice hid the key {CANARY}", embed=False)
    graph_services.triple_upsert(owner=user, subject="spare key", predicate="is_at", object=CANARY)
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
        owner=user, description=f"The key is {CANARY}", embed=False, source="admin"
    )
    critique_services.critique_record(
        node_id=doubted.pk, message=None, verdict="fails", debate="No."
    )
    MemoryNode.objects.filter(pk=doubted.pk).update(created_at="2000-01-01T00:00:00Z")

    forget_services.memories_decay(decay_hours=72, minimum_score=1)

    assert _rows_holding(CANARY) == []


def test_the_browser_shows_a_receipt_after_forgetting(alice, user):
    key, _ = _a_mind_that_knows_the_canary(user)

    notice = alice.post(reverse("memory:forget", args=[key.pk]), HTTP_HX_REQUEST="true")
    assert 'id="memory-undo"' in notice.content.decode()
    # Its Undo passed (the page posts this then): the receipt says what went.
    fragment = alice.post(reverse("memory:forget_now", args=[key.pk]), HTTP_HX_REQUEST="true")
    body = fragment.content.decode()
    assert 'id="forget-receipt"' in body
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


# What a turn teaches, through reflection itself (the stub LLM quotes the user): a memory and a
# fact for each statement, both with the turn's reply as their source.


@pytest.fixture
def laura(user, llm_stub, config):
    from apps.cognition.reflection import reflect_on_message
    from tests.cognition.conftest import reflection

    config(critic_enabled=False)
    conversation = Conversation.objects.create(owner=user)
    said = Message.objects.create(
        conversation=conversation, role="user", content="My name is Zoë Laura and I live in Turin"
    )
    reply = Message.objects.create(
        conversation=conversation, role="assistant", content="Ciao!", reply_to=said
    )
    llm_stub.script(reflection("My name is Zoë Laura", "I live in Turin"))
    reflect_on_message(message_id=reply.pk)
    facts = {t.predicate.name: t.object for t in Triple.objects.filter(owner=user)}
    assert facts == {"has_name": "Zoë Laura", "lives_in": "Turin"}
    return MemoryNode.objects.get(owner=user, description__contains="name")


@pytest.mark.django_db(transaction=True)
def test_marking_a_memory_wrong_retracts_the_facts_that_state_it(alice, user, laura):
    response = alice.post(reverse("memory:wrong", args=[laura.pk]))
    assert response.status_code in (200, 302)

    current = Triple.objects.filter(owner=user, valid_to=None)
    assert list(current.values_list("object", flat=True)) == ["Turin"]
    facts_page = alice.get(reverse("memory:knowledge")).content.decode()
    assert "Zoë" not in facts_page and "Turin" in facts_page
    # Retracted as the memory is, kept as history: not forgotten.
    assert Triple.objects.filter(owner=user, object="Zoë Laura").exists()
    wrong = user.events.get(payload__action="wrong")
    assert wrong.payload["triple_ids"] == [Triple.objects.get(object="Zoë Laura").pk]


@pytest.mark.django_db(transaction=True)
def test_forgetting_a_memory_takes_the_facts_that_restate_it_not_the_rest_of_its_turn(user, laura):
    receipt = browser_services.memory_nodes_forget(node_ids=[laura.pk])

    assert receipt.triples == 1
    assert list(Triple.objects.values_list("object", flat=True)) == ["Turin"]
    assert list(MemoryNode.objects.values_list("description", flat=True)) == [
        "The user lives in Turin"
    ]


def test_forgetting_a_fact_or_an_episode_by_hand_drops_the_notes_that_quote_them(alice, user):
    conversation = Conversation.objects.create(owner=user)
    key = graph_services.triple_upsert(
        owner=user, subject="spare key", predicate="is_at", object=CANARY
    )
    other = graph_services.triple_upsert(
        owner=user, subject="user", predicate="keeps", object="bees"
    )
    hid = episode_services.episode_create(
        owner=user, summary=f"Alice hid the key {CANARY}", embed=False
    )
    event_record(
        kind=Event.Kind.EPISODE,
        owner=user,
        summary=f"remembered an episode: {hid.summary}",
        payload={"episode_id": hid.pk},
    )

    def answer(note: dict) -> Message:
        return Message.objects.create(
            conversation=conversation,
            role="assistant",
            content="Noted.",
            trace={
                "memory": {"triples": [{"id": key.pk}, {"id": other.pk}], "episodes": []},
                "note": {
                    "text": f"- {CANARY}",
                    "memories": [],
                    "triples": [],
                    "episodes": [],
                    **note,
                },
            },
        )

    quoting_fact = answer({"triples": [key.pk]})
    quoting_episode = answer({"episodes": [hid.pk]})
    quoting_neither = answer({"text": "- bees", "triples": [other.pk]})

    alice.post(reverse("memory:knowledge_forget"), {"triples": [key.pk], "episodes": [hid.pk]})

    assert _rows_holding(CANARY) == []
    for message in (quoting_fact, quoting_episode):
        message.refresh_from_db()
        assert "note" not in message.trace
        assert message.trace["memory"]["triples"] == [{"id": other.pk}]
    quoting_neither.refresh_from_db()
    assert quoting_neither.trace["note"]["text"] == "- bees"


def test_decay_takes_only_the_plan_steps_and_debates_that_quote_what_it_forgot(user):
    conversation = Conversation.objects.create(owner=user)
    services.memory_node_create(
        owner=user, description=f"The key is {CANARY}", embed=False, source="admin"
    )
    MemoryNode.objects.update(created_at="2000-01-01T00:00:00Z")

    def answer(query: str, draft: str) -> Message:
        return Message.objects.create(
            conversation=conversation,
            role="assistant",
            content="Noted.",
            trace={
                "memory": {"plan": {"steps": [{"query": query}]}},
                "debate": {"rules": 1, "draft": draft},
            },
        )

    quoting = answer(f"the key is {CANARY}", f"The key is {CANARY}.")
    paraphrasing = answer("which flowerpot", "Under a flowerpot.")

    forget_services.memories_decay(decay_hours=72, minimum_score=1)

    assert _rows_holding(CANARY) == []
    quoting.refresh_from_db()
    assert quoting.trace == {"memory": {"plan": {"steps": []}}, "debate": {"rules": 1}}
    # Decay runs every hour over memories nobody used: what only paraphrases them stays.
    paraphrasing.refresh_from_db()
    assert paraphrasing.trace["debate"]["draft"] == "Under a flowerpot."
