from __future__ import annotations

import pytest

from apps.cognition import tasks
from apps.core.models import Event
from apps.memory.models import MemoryNode
from tests.cognition.conftest import memory, reflection

REPAIR = "does not match the required JSON schema"


@pytest.fixture
def no_backoff(monkeypatch):
    monkeypatch.setattr(tasks, "INVALID_REPLY_BACKOFF", 0)


def test_a_model_that_answers_unusably_once_then_well_forms_the_memory(
    celery_worker, user, turn, llm_stub, config, no_backoff
):
    config(critic_enabled=False)
    reply = turn("I am learning Japanese", "頑張って!")
    llm_stub.script(
        {"content": "I think you are learning something.", "match": "reflective memory"},
        {"content": "Still no JSON, sorry.", "match": REPAIR},
        reflection(memories=[memory("The user is learning Japanese")]),
    )

    tasks.reflect.delay(reply.pk).get(timeout=30)

    assert MemoryNode.objects.get(owner=user).description == "The user is learning Japanese"
    reply.refresh_from_db()
    assert "error" not in reply.trace["reflection"]
    assert not Event.objects.filter(owner=user, kind="error").exists()


def test_a_model_whose_every_memory_is_a_placeholder_is_asked_again_then_marked_failed(
    celery_worker, user, turn, llm_stub, config, no_backoff
):
    config(critic_enabled=False)
    reply = turn("I like hiking in the Alps", "Sounds lovely.")
    junk = reflection(memories=[memory("N/A"), memory("string"), memory("...")])
    llm_stub.script(*[junk] * tasks.INVALID_REPLY_ATTEMPTS)

    tasks.reflect.delay(reply.pk).get(timeout=30)

    reply.refresh_from_db()
    failed = reply.trace["reflection"]
    assert failed["failed"] is True and failed["attempts"] == tasks.INVALID_REPLY_ATTEMPTS
    assert "placeholder" in failed["error"]
    assert not MemoryNode.objects.exists()
    error = Event.objects.get(owner=user, kind="error")
    assert error.payload["message_id"] == reply.pk
    asked = [r for r in llm_stub.requests if "reflective memory" in str(r["body"])]
    assert len(asked) == tasks.INVALID_REPLY_ATTEMPTS


def test_a_failed_reflection_is_marked_once_however_often_it_is_delivered(
    celery_worker, user, turn, llm_stub, config, no_backoff
):
    config(critic_enabled=False)
    reply = turn("I have two brothers", "Nice.")
    llm_stub.set_defaults(json_junk="empty")

    tasks.reflect.delay(reply.pk).get(timeout=30)
    tasks.reflect.delay(reply.pk).get(timeout=30)

    assert Event.objects.filter(owner=user, kind="error").count() == 1
    reply.refresh_from_db()
    assert reply.trace["reflection"]["attempts"] == tasks.INVALID_REPLY_ATTEMPTS
