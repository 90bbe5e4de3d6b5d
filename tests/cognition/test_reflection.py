from __future__ import annotations

import pytest
from django.utils import timezone

from apps.cognition import tasks
from apps.cognition.reflection import reflect_on_message
from apps.core.models import Event
from apps.memory.models import MemoryNode, RetrievalPlan, Triple
from tests.cognition.conftest import memory, reflection, wait_for


def test_a_completed_reply_forms_memories_triples_and_a_plan_in_the_worker(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False)
    from apps.chat import services as chat_services

    reply = turn("I moved to Rome last week, I love espresso", "")
    llm_stub.script(
        reflection(
            memories=[
                memory("The user lives in Rome", topic="home", fact_key="home_city"),
                memory("The user loves espresso", kind="preference", topic="coffee"),
            ],
            triples=[{"subject": "user", "predicate": "lives in", "object": "Rome"}],
            plan=[{"topic": "Rome", "query": "life in Rome", "types": ["fact"], "limit": 3}],
        )
    )

    chat_services.message_finish(message=reply, status="complete", content="Welcome to Rome!")

    nodes = wait_for(lambda: list(MemoryNode.objects.filter(owner=user).order_by("pk")))
    assert [n.description for n in nodes] == ["The user lives in Rome", "The user loves espresso"]
    assert {n.source_message_id for n in nodes} == {reply.pk}
    assert nodes[0].fact_key == "home_city" and nodes[0].state == "volatile"
    triple = Triple.objects.get(owner=user)
    assert (triple.subject, triple.predicate.name, triple.object) == ("user", "lives_in", "Rome")
    assert RetrievalPlan.objects.get(conversation=reply.conversation).steps[0]["topic"] == "Rome"
    perception = wait_for(lambda: Event.objects.filter(owner=user, kind="perception").first())
    assert perception.payload["created"] == [n.pk for n in nodes]
    request = next(r for r in llm_stub.requests if "reflective memory" in str(r["body"]))
    assert request["body"]["response_format"]["type"] == "json_schema"


def test_reflection_run_twice_writes_once(celery_worker, user, turn, llm_stub, config):
    config(critic_enabled=False)
    reply = turn("My sister is called Anna", "Noted.")
    llm_stub.script(
        reflection(memories=[memory("The user's sister is Anna", fact_key="sister_name")]),
        reflection(memories=[memory("The user's sister is Anna", fact_key="sister_name")]),
    )

    first = tasks.reflect.delay(reply.pk)
    second = tasks.reflect.delay(reply.pk)
    first.get(timeout=15)
    second.get(timeout=15)

    assert MemoryNode.objects.filter(owner=user).count() == 1
    assert Event.objects.filter(owner=user, kind="perception").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_fact_update_evolves_the_fact_instead_of_duplicating_it(user, turn, llm_stub, config):
    config(critic_enabled=False)
    first = turn("I live in Milan", "Nice.")
    llm_stub.script(reflection(memories=[memory("The user lives in Milan", fact_key="home")]))
    reflect_on_message(message_id=first.pk)
    milan = MemoryNode.objects.get(owner=user)

    second = turn("Actually I moved to Turin", "Good luck with the move.")
    llm_stub.script(
        reflection(
            memories=[
                memory(
                    "The user lives in Turin", action="update", existing_id=milan.pk, fact_key=""
                ),
                memory("The user lives in Turin", fact_key="home"),
                memory("The user lives in Turin"),
            ]
        )
    )
    outcome = reflect_on_message(message_id=second.pk)

    current = MemoryNode.objects.get(owner=user, valid_to=None)
    assert current.pk == milan.pk and current.description == "The user lives in Turin"
    assert list(
        MemoryNode.objects.filter(owner=user, valid_to__isnull=False).values_list(
            "description", flat=True
        )
    ) == ["The user lives in Milan"]
    assert outcome["updated"] == [milan.pk] and outcome["left"] == [milan.pk, milan.pk]


def test_garbage_json_is_repaired_once_per_attempt_then_the_turn_is_marked_failed(
    celery_worker, user, turn, llm_stub, config, monkeypatch
):
    config(critic_enabled=False)
    monkeypatch.setattr(tasks, "INVALID_REPLY_BACKOFF", 0)
    reply = turn("I have a cat named Miso", "Cute!")
    llm_stub.script(
        *[
            {"fault": "garbage", "match": "reflective memory"},
            {"fault": "garbage", "match": "does not match the required JSON schema"},
        ]
        * tasks.INVALID_REPLY_ATTEMPTS
    )

    tasks.reflect.delay(reply.pk).get(timeout=30)

    error = Event.objects.get(owner=user, kind="error")
    assert error.payload["step"] == "reflection" and error.payload["message_id"] == reply.pk
    reply.refresh_from_db()
    assert reply.trace["reflection"]["failed"] is True
    assert reply.trace["reflection"]["attempts"] == tasks.INVALID_REPLY_ATTEMPTS
    assert not MemoryNode.objects.exists() and not Triple.objects.exists()
    assert not RetrievalPlan.objects.exists()
    chats = [r for r in llm_stub.requests if r["path"].endswith("/chat/completions")]
    assert len(chats) == 2 * tasks.INVALID_REPLY_ATTEMPTS


def test_a_repaired_reply_is_used(celery_worker, user, turn, llm_stub, config):
    config(critic_enabled=False)
    reply = turn("I am vegetarian", "Got it.")
    llm_stub.script(
        {"content": '{"memories": "nope"}', "match": "reflective memory"},
        {
            "json": reflection(memories=[memory("The user is vegetarian")])["json"],
            "match": "does not match the required JSON schema",
        },
    )

    tasks.reflect.delay(reply.pk).get(timeout=15)

    assert MemoryNode.objects.get(owner=user).description == "The user is vegetarian"


def test_an_llm_500_is_retried_then_recorded(
    celery_worker, user, turn, llm_stub, config, monkeypatch
):
    config(critic_enabled=False)
    monkeypatch.setattr(tasks.reflect, "max_retries", 2)
    reply = turn("I play the cello", "Lovely.")
    llm_stub.script(*[{"fault": "http_500", "match": "reflective memory"}] * 3)

    tasks.reflect.delay(reply.pk)
    wait_for(lambda: Event.objects.filter(owner=user, kind="error").exists(), timeout=20)

    chats = [r for r in llm_stub.requests if "reflective memory" in str(r["body"])]
    assert len(chats) == 3
    assert "gave up after 3 attempts" in Event.objects.get(owner=user, kind="error").summary
    assert not MemoryNode.objects.exists()
    reply.refresh_from_db()
    assert reply.trace["reflection"]["failed"] is True


@pytest.mark.django_db(transaction=True)
def test_a_fact_true_only_for_a_while_gets_an_end_of_validity(
    turn, llm_stub, celery_worker, config
):
    from datetime import date, timedelta

    from apps.cognition import tasks

    config(critic_enabled=False)
    tomorrow = date.today() + timedelta(days=1)
    reply = turn("I have an exam tomorrow", "Good luck!")
    llm_stub.script(
        reflection(
            memories=[
                memory(
                    "The user has an exam",
                    source="user",
                    quote="I have an exam tomorrow",
                    valid_until=tomorrow.isoformat(),
                )
            ]
        )
    )

    tasks.reflect.delay(reply.pk)

    node = wait_for(lambda: MemoryNode.objects.filter(description="The user has an exam").first())
    assert timezone.localtime(node.valid_until).date() == tomorrow
    prompt = next(r for r in llm_stub.requests if "reflective memory" in str(r["body"]))
    assert f"Today is {timezone.localdate().isoformat()}." in str(prompt["body"])
