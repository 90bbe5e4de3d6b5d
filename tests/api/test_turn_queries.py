"""The statements a /v1 turn runs on its way to the answer's request, counted: each is a round
trip before the first token, so a new one must be a choice, not an accident."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from apps.accounts.services import api_key_create
from apps.api.calls import call_accept, call_start_turn
from apps.chat.admission import stream_slot_release
from apps.chat.models import Conversation, Message
from apps.cognition import pipeline
from apps.cognition.turn_memory import memory_for_turn
from apps.core.selectors import prompt_text

pytestmark = pytest.mark.django_db(transaction=True)


def _call(secret: str, messages: list[dict]):
    request = RequestFactory().post(
        "/v1/chat/completions",
        data=json.dumps({"model": "thalamus", "messages": messages, "stream": True}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    return request, request.body


def _statements(captured: CaptureQueriesContext) -> list[str]:
    return [query["sql"].split()[0] for query in captured.captured_queries]


def test_a_turn_continuing_a_conversation_reaches_its_answer_in_few_statements(user, llm_stub):
    _, secret = api_key_create(user=user, name="tests")
    conversation = Conversation.objects.create(owner=user)
    history = []
    for question, answer in (("Hello there", "Hi!"), ("I keep bees", "Lovely.")):
        asked = Message.objects.create(conversation=conversation, role="user", content=question)
        Message.objects.create(
            conversation=conversation, role="assistant", content=answer, reply_to=asked
        )
        history += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    history.append({"role": "user", "content": "Where do my bees live?"})
    # The key's first use is written down, later calls within a minute are not; the answer's
    # template is cached from the first turn a process makes on.
    first = call_accept(*_call(secret, history[:1]))
    stream_slot_release(user_id=user.pk, slot=first.slot)
    prompt_text("answer")

    # Accepted, its conversation found by the history, and saved there, on one thread: the
    # key, the candidates with their messages, then the save in one statement, a transaction of
    # its own (no BEGIN, COMMIT nor savepoint).
    with CaptureQueriesContext(connection) as accepted:
        call = call_accept(*_call(secret, history))
    turn = call.started.turn
    assert turn.input.conversation == conversation
    assert call.sent.reply.conversation_id == conversation.pk
    assert len(accepted) <= 3, _statements(accepted)
    assert _statements(accepted)[-1] == "WITH", _statements(accepted)
    assert [m.content for m in call.sent.history][-1] == "Where do my bees live?"
    # The message's embedding and search left with the accept, and the recall after them, on
    # threads of their own.
    own = call.started.own
    assert own is not None and own.search is not None
    assert call.started.recalled.result(timeout=10).remember

    # Recalled: the settings, the notes to replay, the plan with the graph, the world state
    # (the search itself runs on a pool thread of its own, beside them).
    with CaptureQueriesContext(connection) as recalled:
        memory = memory_for_turn(
            user=user, conversation=conversation, text=turn.input.text, config=call.config, own=own
        )
    assert memory.remember
    assert len(recalled) <= 4, _statements(recalled)
    stream_slot_release(user_id=user.pk, slot=call.slot)


def test_with_every_recall_thread_busy_the_turn_recalls_on_the_loops_pool(user, llm_stub):
    """The pool the accept starts recalls on never queues them: when it is full, the turn's run
    starts its recall itself."""
    _, secret = api_key_create(user=user, name="tests")
    busy = threading.Event()
    held = [pipeline._RECALL_POOL.submit(busy.wait) for _ in range(pipeline._RECALL_POOL.capacity)]
    try:
        call = call_accept(*_call(secret, [{"role": "user", "content": "I keep bees"}]))
        assert call.started.recalled is None

        async def prepared():
            reply, preparing = call_start_turn(call)
            return reply, await preparing

        reply, turn = asyncio.run(prepared())
    finally:
        busy.set()
        for future in held:
            future.result(timeout=10)
    assert turn.reply == reply == call.sent.reply
    assert turn.trace["memory"]["route"] and turn.messages[-1]["content"].endswith("I keep bees")
    stream_slot_release(user_id=user.pk, slot=call.slot)
