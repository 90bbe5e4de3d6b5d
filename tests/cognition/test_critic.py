from __future__ import annotations

import threading

import pytest
from django.db import connection

from apps.chat.models import Message
from apps.cognition import tasks
from apps.cognition.reflection import reflect_on_message
from apps.core.models import Event
from apps.memory import services as memory_services
from apps.memory.models import Critique, MemoryNode
from tests.cognition.conftest import reflection, verdict


def test_the_critic_raises_a_withstanding_memory_and_lowers_a_failing_one(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False)
    reply = turn("I run marathons and I hate running", "Interesting!")
    llm_stub.script(reflection("I run marathons and I hate running"))
    reflect_on_message(message_id=reply.pk)
    config(critic_enabled=True, critic_model="sceptic:1b")
    llm_stub.script(
        {**verdict("withstands"), "match": "The user runs marathons\n"},
        {**verdict("fails", debate="Against: it contradicts marathons."), "match": "hates"},
    )

    tasks.criticise.delay(reply.pk).get(timeout=15)

    scores = dict(MemoryNode.objects.values_list("description", "confidence_score"))
    assert scores == {"The user runs marathons": 2, "The user hates running": 0}
    failed = Critique.objects.get(verdict="fails")
    assert failed.debate == "Against: it contradicts marathons." and failed.model == "sceptic:1b"
    events = Event.objects.filter(owner=user, kind="critique")
    assert sorted(e.payload["verdict"] for e in events) == ["fails", "withstands"]
    critic_requests = [r for r in llm_stub.requests if "sceptical critic" in str(r["body"])]
    assert {r["body"]["model"] for r in critic_requests} == {"sceptic:1b"}

    tasks.criticise.delay(reply.pk).get(timeout=15)  # redelivered: judged once per turn

    assert Critique.objects.count() == 2
    assert MemoryNode.objects.get(description="The user runs marathons").confidence_score == 2


def test_a_disabled_critic_judges_nothing(celery_worker, user, turn, llm_stub, config):
    reply = turn("I like tea", "Me too.")
    config(critic_enabled=False)
    llm_stub.script(reflection("I like tea"))
    reflect_on_message(message_id=reply.pk)

    tasks.criticise.delay(reply.pk).get(timeout=15)

    assert not Critique.objects.exists()
    assert not [r for r in llm_stub.requests if "sceptical critic" in str(r["body"])]


@pytest.mark.django_db(transaction=True)
def test_concurrent_critiques_of_one_node_lose_no_update(user, turn):
    node = memory_services.memory_node_create(owner=user, description="Speaks Finnish")
    replies = [turn(f"question {i}", f"answer {i}") for i in range(8)]
    verdicts = ["withstands"] * 5 + ["fails"] * 3
    start = threading.Barrier(len(replies))
    errors = []

    def judge(reply: Message, outcome: str) -> None:
        try:
            start.wait()
            memory_services.critique_record(
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
