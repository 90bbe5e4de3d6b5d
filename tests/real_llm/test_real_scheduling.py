"""Background work against a real llama.cpp server while a user keeps chatting: a reflection
runs in a slot the server has spare, or gives way at most twice, and always completes."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition.answer import AnswerFailed
from apps.cognition.pipeline import answer_saved_reply
from apps.core.llm import gateway
from apps.core.llm.limits import CHAT, REFLECTION, role_endpoint
from apps.core.llm.priority import MAX_GIVE_WAYS
from apps.core.llm.replies import Reply
from apps.core.llm.servers import server_facts
from bench._llama import MODEL_NAME

pytestmark = [pytest.mark.real_llm, pytest.mark.django_db(transaction=True)]

# Long enough to take the server several seconds, so answers start while it generates.
REFLECTION_PROMPT = [
    {
        "role": "user",
        "content": "List twenty things a person could tell an assistant about their life, one "
        "a line, each a full sentence.",
    }
]
QUESTION = "Tell me about the sea in three sentences."


def _send(user) -> Message:
    conversation = Conversation.objects.create(owner=user)
    return services.message_send(conversation=conversation, content=QUESTION).reply


async def _answer(user) -> tuple[float, float]:
    """One turn through Thalamus's own streaming path; (started, ended), monotonic."""
    started = time.monotonic()
    reply = await sync_to_async(_send)(user)
    try:
        async for _ in answer_saved_reply(reply_id=reply.pk):
            pass
    except AnswerFailed:
        pass
    return started, time.monotonic()


def _reflect() -> tuple[Reply, float, float]:
    started = time.monotonic()
    reply = gateway.complete(role=REFLECTION, prompt=REFLECTION_PROMPT, max_tokens=200)
    return reply, started, time.monotonic()


async def _chat_while_reflecting(user, *, typing: float) -> tuple[Reply, int]:
    """Answers one after another (`typing` seconds between them) for as long as a reflection
    call runs; the reflection's reply and how many answers overlapped it."""
    reflecting = asyncio.ensure_future(asyncio.to_thread(_reflect))
    answers = []
    async with asyncio.timeout(240):
        while not reflecting.done():
            answers.append(await _answer(user))
            await asyncio.sleep(typing)
        reply, started, ended = await reflecting
    overlapping = sum(1 for a_start, a_end in answers if a_start < ended and a_end > started)
    return reply, overlapping


async def test_a_reflection_under_continuous_chatting_runs_in_a_spare_slot(
    user, on_real_llm, real_llm
):
    await sync_to_async(on_real_llm)(
        answer_max_tokens=48, background_max_tokens=200, reflection_enabled=False
    )
    slots = await sync_to_async(lambda: server_facts(role_endpoint(CHAT)).slots)()
    assert slots == 4, "llama-server's /props reports its four slots"

    reply, overlapping = await _chat_while_reflecting(user, typing=0.0)

    assert reply.content.strip() and reply.model == MODEL_NAME
    assert overlapping >= 1, "answers streamed while the reflection ran"
    # One answer at a time leaves slots free: it never waited nor started over.
    assert reply.gave_way == 0 and reply.waited_seconds < 1


async def test_on_one_slot_a_reflection_gives_way_twice_at_most_then_completes(
    user, on_real_llm, one_slot_real_llm
):
    await sync_to_async(on_real_llm)(
        llm_base_url=one_slot_real_llm.url,
        answer_max_tokens=48,
        background_max_tokens=200,
        reflection_enabled=False,
    )
    slots = await sync_to_async(lambda: server_facts(role_endpoint(CHAT)).slots)()
    assert slots == 1

    # A user who reads each answer for a second and writes the next one.
    reply, overlapping = await _chat_while_reflecting(user, typing=1.0)

    assert reply.content.strip() and reply.finish_reason in {"stop", "length"}
    assert overlapping >= 1
    assert reply.gave_way <= MAX_GIVE_WAYS
