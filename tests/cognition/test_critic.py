from __future__ import annotations

import threading

import pytest
from django.db import connection

from apps.chat.models import Message
from apps.cognition import critic, tasks
from apps.cognition.reflection import reflect_on_message
from apps.core.models import Event
from apps.memory import critique_services
from apps.memory import services as memory_services
from apps.memory.models import Critique, MemoryNode
from tests.cognition.conftest import reflection, verdict


def test_the_critic_raises_what_withstands_and_cannot_argue_down_the_users_own_words(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False)
    reply = turn("I run marathons and I hate running", "Interesting!")
    llm_stub.script(reflection("I run marathons and I hate running"))
    reflect_on_message(message_id=reply.pk)
    assert set(MemoryNode.objects.values_list("source", flat=True)) == {"user"}
    config(critic_enabled=True, critic_model="sceptic:1b")
    llm_stub.script(
        {**verdict("withstands"), "match": "The user runs marathons\n"},
        {**verdict("fails", debate="Against: it contradicts marathons."), "match": "hates"},
    )

    tasks.criticise.delay(reply.pk).get(timeout=45)

    scores = dict(MemoryNode.objects.values_list("description", "confidence_score"))
    assert scores == {"The user runs marathons": 2, "The user hates running": 1}
    failed = Critique.objects.get(verdict="fails")
    assert failed.debate == "Against: it contradicts marathons." and failed.model == "sceptic:1b"
    assert failed.delta == 0
    events = Event.objects.filter(owner=user, kind="critique")
    assert sorted((e.payload["verdict"], e.payload["delta"]) for e in events) == [
        ("fails", 0),
        ("withstands", 1),
    ]
    kept = events.get(payload__verdict="fails").summary
    assert "you said it yourself" in kept and "The user hates running" in kept
    judged = Message.objects.get(pk=reply.pk).trace["critic"]["judged"]
    assert {(j["node"], j["verdict"], j["delta"]) for j in judged} == {
        (failed.node_id, "fails", 0),
        (MemoryNode.objects.get(description="The user runs marathons").pk, "withstands", 1),
    }
    critic_requests = [r for r in llm_stub.requests if "sceptical critic" in str(r["body"])]
    assert {r["body"]["model"] for r in critic_requests} == {"sceptic:1b"}

    tasks.criticise.delay(reply.pk).get(timeout=45)  # redelivered: judged once per turn

    assert Critique.objects.count() == 2
    assert MemoryNode.objects.get(description="The user runs marathons").confidence_score == 2


@pytest.mark.parametrize("source", [MemoryNode.Source.INFERRED, MemoryNode.Source.IMPORTED])
def test_the_critic_argues_down_what_was_not_the_users_own_words(
    user, turn, llm_stub, config, source
):
    config(critic_enabled=True)
    reply = turn("Where should I go running?", "Try the park.")
    node = memory_services.memory_node_create(
        owner=user, description="The user lives near a park", source_message=reply, source=source
    )
    llm_stub.script({**verdict("fails", debate="Against: nobody said so."), "match": "park"})

    critic.criticise_unreviewed()

    critique = Critique.objects.get(node=node)
    assert (critique.verdict, critique.delta) == ("fails", -1)
    node.refresh_from_db()
    assert node.confidence_score == 0
    summary = Event.objects.get(owner=user, kind="critique").summary
    assert "so I trust it less (now 0%)" in summary


def test_the_users_own_words_lose_confidence_to_their_later_words_not_to_the_critic(user, turn):
    said = turn("My name is Nora", "Hello Nora.")
    node = memory_services.memory_node_create(
        owner=user,
        description="The user's name is Nora",
        fact_key="name",
        source_message=said,
        source=MemoryNode.Source.USER,
        quote="My name is Nora",
    )
    assert node.source == MemoryNode.Source.USER
    for _ in range(3):
        critique_services.critique_record(
            node_id=node.pk, message=None, verdict="fails", debate="Against: a guess."
        )
    node.refresh_from_db()
    assert node.confidence_score == 1
    assert list(Critique.objects.filter(node=node).values_list("delta", flat=True)) == [0, 0, 0]

    later = turn("Actually my name is Nina", "Sorry, Nina.")
    memory_services.memory_node_revise(
        node=node,
        description="The user's name is Nina",
        source_message=later,
        source=MemoryNode.Source.USER,
        quote="Actually my name is Nina",
    )
    history = MemoryNode.objects.get(owner=user, fact_key="name", valid_to__isnull=False)
    assert history.description == "The user's name is Nora"
    assert MemoryNode.objects.get(pk=node.pk).description == "The user's name is Nina"


def test_a_disabled_critic_judges_nothing(celery_worker, user, turn, llm_stub, config):
    reply = turn("I like tea", "Me too.")
    config(critic_enabled=False)
    llm_stub.script(reflection("I like tea"))
    reflect_on_message(message_id=reply.pk)

    tasks.criticise.delay(reply.pk).get(timeout=45)

    assert not Critique.objects.exists()
    assert not [r for r in llm_stub.requests if "sceptical critic" in str(r["body"])]


@pytest.mark.django_db(transaction=True)
def test_concurrent_critiques_of_one_node_lose_no_update(user, turn):
    node = memory_services.memory_node_create(
        owner=user, description="Speaks Finnish", source="admin"
    )
    replies = [turn(f"question {i}", f"answer {i}") for i in range(8)]
    verdicts = ["withstands"] * 5 + ["fails"] * 3
    start = threading.Barrier(len(replies))
    errors = []

    def judge(reply: Message, outcome: str) -> None:
        try:
            start.wait()
            critique_services.critique_record(
                node_id=node.pk, message=reply, verdict=outcome, debate="debate"
            )
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=judge, args=(reply, outcome))
        for reply, outcome in zip(replies, verdicts, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    node.refresh_from_db()
    assert node.confidence_score == 1 + 5 - 3
    assert Critique.objects.filter(node=node).count() == 8
