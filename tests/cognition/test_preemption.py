"""Background work the chat preempts is queued again and finishes once the user is quiet: a
real worker, the stub on one slot, an answer marked on the server while the call generates."""

from __future__ import annotations

import threading

import pytest

from apps.chat.models import Conversation, Message
from apps.cognition import tasks
from apps.core.llm.limits import CHAT, role_endpoint
from apps.core.llm.outcomes import Preempted
from apps.core.llm.priority import chat_active_clear, chat_active_mark
from apps.core.metrics import metrics_text
from apps.core.models import Event
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

    tasks.reflect.delay(reply.pk).get(timeout=30)
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

    title_conversation.delay(conversation.pk).get(timeout=20)
    answer.join()

    wait_for(lambda: Conversation.objects.get(pk=conversation.pk).title)
    assert Conversation.objects.get(pk=conversation.pk).title == "Painting birds"
    assert len(_asked(llm_stub, "short title")) == 2
