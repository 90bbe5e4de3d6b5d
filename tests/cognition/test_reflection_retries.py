from __future__ import annotations

import pytest

from apps.cognition import tasks
from apps.core.models import Event
from apps.memory.models import MemoryNode
from tests.cognition.conftest import EXTRACT, reflection

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = pytest.mark.usefixtures("no_outbound_in_atomic")

REPAIR = "does not match the required JSON schema"


def test_a_model_that_answers_unusably_once_then_well_forms_the_memory(
    celery_worker, user, turn, llm_stub, config, no_backoff
):
    config(critic_enabled=False)
    reply = turn("I am learning Japanese", "頑張って!")
    llm_stub.script(
        {"content": "I think you are learning something.", "match": EXTRACT},
        {"content": "Still no JSON, sorry.", "match": REPAIR},
        reflection("I am learning Japanese"),
    )

    tasks.reflect.delay(reply.pk).get(timeout=45)

    assert MemoryNode.objects.get(owner=user).description == "The user is learning Japanese"
    reply.refresh_from_db()
    assert "error" not in reply.trace["reflection"]
    assert not Event.objects.filter(owner=user, kind="error").exists()


def test_placeholder_quotes_are_rejected_without_asking_again(
    celery_worker, user, turn, llm_stub, config, no_backoff
):
    config(critic_enabled=False)
    # A statement no rule places, so that only a quote could have taught it.
    reply = turn("I have a collection of old stamps", "Sounds lovely.")
    llm_stub.script(reflection("N/A", "string"))

    tasks.reflect.delay(reply.pk).get(timeout=45)

    reply.refresh_from_db()
    outcome = reply.trace["reflection"]
    assert [item["text"] for item in outcome["rejected"]] == ["N/A", "string"]
    assert outcome["stated"] is True and outcome["taught"] is False
    assert not MemoryNode.objects.exists()
    assert len([r for r in llm_stub.requests if EXTRACT in str(r["body"])]) == 1


def test_a_failed_reflection_is_marked_once_however_often_it_is_delivered(
    celery_worker, user, turn, llm_stub, config, no_backoff
):
    config(critic_enabled=False)
    reply = turn("I collect old stamps", "Nice.")
    llm_stub.set_defaults(json_junk="empty")

    tasks.reflect.delay(reply.pk).get(timeout=45)
    tasks.reflect.delay(reply.pk).get(timeout=45)

    assert Event.objects.filter(owner=user, kind="error").count() == 1
    reply.refresh_from_db()
    assert reply.trace["reflection"]["attempts"] == tasks.INVALID_REPLY_ATTEMPTS
