"""Background work the chat preempts is queued again and finishes once the user is quiet: a
real worker, the stub on one slot, an answer marked on the server while the call generates."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.cognition import reflection_timing, tasks
from apps.core.llm.limits import CHAT, role_endpoint
from apps.core.llm.outcomes import Preempted
from apps.core.llm.priority import chat_active_clear, chat_active_mark
from apps.core.metrics import metrics_text
from apps.core.models import Event
from apps.core.selectors import runtime_config
from apps.memory.models import MemoryNode
from tests.cognition.conftest import EXTRACT, reflection, wait_for

pytestmark = pytest.mark.usefixtures("no_outbound_in_atomic")

# The first ask reads its prompt for this long: the answer arrives while it is in hand.
SLOW = 1.5


def _an_answer_arrives_while_asked(llm_stub, phrase: str) -> threading.Thread:
    """Once the stub holds a request with `phrase` (its scripted reply taken), an answer marked
    on the chat's server (as the chat's streaming marks it) until that request gave way: the
    stub gave its reply back for the next ask."""
    base_url = role_endpoint(CHAT).base_url

    def answer() -> None:
        wait_for(lambda: _asked(llm_stub, phrase) and not llm_stub.pending)
        chat_active_mark(base_url=base_url, call_id="answer")
        try:
            wait_for(lambda: llm_stub.pending)
        finally:
            chat_active_clear(base_url=base_url, call_id="answer")

    thread = threading.Thread(target=answer)
    thread.start()
    return thread


def _asked(llm_stub, phrase: str) -> list[dict]:
    return [r for r in llm_stub.requests if phrase in str(r["body"].get("messages"))]


def test_a_preempted_reflection_runs_again_and_remembers(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False, reflection_quiet_seconds=0, background_wait_seconds=30)
    llm_stub.set_defaults(slots=1)
    # A statement no rule places: only the model's quote can teach it.
    reply = turn("I have a collection of old stamps", "Lovely.")
    # The stub gives a reply whose client left to the next ask (`resend`).
    llm_stub.script(
        {**reflection("I have a collection of old stamps"), "ttft": SLOW, "resend": True}
    )
    answer = _an_answer_arrives_while_asked(llm_stub, EXTRACT)

    tasks.reflect.delay(reply.pk).get(timeout=45)
    answer.join()
    node = wait_for(lambda: MemoryNode.objects.filter(owner=user).first())

    assert "collection of old stamps" in node.description
    first, again = _asked(llm_stub, EXTRACT)
    assert again["body"]["messages"] == first["body"]["messages"]
    assert f'kind="{Preempted.kind}"' in metrics_text().decode()
    reply.refresh_from_db()
    assert "error" not in reply.trace["reflection"]
    assert not Event.objects.filter(owner=user, kind="error").exists()


def test_a_preempted_title_is_asked_again_not_replaced_by_the_first_words(
    celery_worker, user, llm_stub, config
):
    from apps.chat.tasks import title_conversation

    config(reflection_quiet_seconds=0, background_wait_seconds=30)
    llm_stub.set_defaults(slots=1)
    llm_stub.script({"content": "Painting birds", "ttft": SLOW, "resend": True})
    conversation = Conversation.objects.create(owner=user)
    said = "Hi! My name is Laura. I live in Lisbon and I love painting birds on Sundays."
    Message.objects.create(conversation=conversation, role="user", content=said)
    answer = _an_answer_arrives_while_asked(llm_stub, "short title")

    title_conversation.delay(conversation.pk).get(timeout=45)
    answer.join()

    wait_for(lambda: Conversation.objects.get(pk=conversation.pk).title)
    assert Conversation.objects.get(pk=conversation.pk).title == "Painting birds"
    assert len(_asked(llm_stub, "short title")) == 2


def _quiet_for_a_minute(conversation: Conversation) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now() - timedelta(minutes=1)
    )


def test_a_reflection_run_again_after_giving_way_waits_while_the_user_talks(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False, reflection_quiet_seconds=30)
    llm_stub.script(reflection("I have a collection of old stamps"))
    reply = turn("I have a collection of old stamps", "Lovely.")
    conversation = reply.conversation

    # The user wrote a moment ago (a send moves the conversation's updated_at).
    tasks.reflect_conversation.delay(conversation.pk, preempted=1).get(timeout=45)
    assert _asked(llm_stub, EXTRACT) == []

    _quiet_for_a_minute(conversation)
    tasks.reflect_conversation.delay(conversation.pk, preempted=1).get(timeout=45)
    assert len(_asked(llm_stub, EXTRACT)) == 1
    reply.refresh_from_db()
    assert "error" not in reply.trace["reflection"]


def test_a_reflection_that_gave_way_waits_for_the_quiet_not_for_every_few_turns(
    celery_worker, user, turn, llm_stub, config
):
    config(
        critic_enabled=False,
        reflection_quiet_seconds=30,
        reflection_every_turns=2,
        background_wait_seconds=30,
    )
    llm_stub.set_defaults(slots=1)
    replies = [turn(f"I have {n} old stamps", "Lovely.") for n in ("two", "three", "four")]
    conversation = replies[0].conversation
    _quiet_for_a_minute(conversation)
    due = reflection_timing.reflection_due
    settings = runtime_config()
    assert due(conversation_id=conversation.pk, reply_id=replies[0].pk, config=settings)
    said = reflection(
        "I have two old stamps",
        message_2=["I have three old stamps"],
        message_3=["I have four old stamps"],
    )
    llm_stub.script({**said, "ttft": SLOW, "resend": True})
    answer = _an_answer_arrives_while_asked(llm_stub, EXTRACT)

    tasks.reflect_conversation.delay(conversation.pk).get(timeout=45)
    answer.join()

    # Two turns wait, but the user talks: only the quiet after their latest reply is due.
    assert not due(conversation_id=conversation.pk, reply_id=replies[0].pk, config=settings)
    assert due(conversation_id=conversation.pk, reply_id=replies[-1].pk, config=settings)
    tasks.reflect_conversation.delay(conversation.pk).get(timeout=45)
    assert len(_asked(llm_stub, EXTRACT)) == 2
    assert all("reflection" in r.trace for r in Message.objects.filter(role="assistant"))
    # Once a reflection is done, the rule holds again.
    later = [turn(f"I have {n} old coins", "Nice.") for n in ("two", "three")]
    assert due(conversation_id=conversation.pk, reply_id=later[0].pk, config=settings)
