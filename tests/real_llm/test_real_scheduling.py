"""Background work against a real llama.cpp server while a user chats: a reflection runs in a
slot the server has spare; on one slot an answer preempts it, the server stops generating it at
once, and the reflection, queued again, completes and remembers once the user is quiet."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest
from asgiref.sync import sync_to_async

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition import tasks
from apps.cognition.answer import AnswerFailed
from apps.cognition.pipeline import answer_saved_reply
from apps.core.llm import gateway
from apps.core.llm.limits import CHAT, REFLECTION, role_endpoint
from apps.core.llm.outcomes import Preempted
from apps.core.llm.priority import chat_active_clear, chat_active_mark
from apps.core.llm.replies import Reply
from apps.core.llm.servers import server_facts
from apps.core.metrics import metrics_text
from apps.memory.models import MemoryNode
from bench._llama import MODEL_NAME
from tests.cognition.conftest import wait_for

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
    # One answer at a time leaves slots free: it never waited nor was preempted.
    assert reply.waited_seconds < 1


def _slots(server) -> list[dict]:
    return httpx.get(f"{server.root}/slots", timeout=10).json()


def _generating(server) -> bool:
    """The server's one slot is generating (not only reading its prompt)."""
    (slot,) = _slots(server)
    return slot["is_processing"] and slot["next_token"][0]["n_decoded"] > 0


def test_on_one_slot_a_preempted_reflection_is_stopped_by_the_server_at_once(
    on_real_llm, one_slot_real_llm
):
    on_real_llm(llm_base_url=one_slot_real_llm.url, background_max_tokens=400)
    base_url = role_endpoint(CHAT).base_url
    assert server_facts(role_endpoint(CHAT)).slots == 1
    outcome: list[BaseException] = []

    def reflect() -> None:
        try:
            gateway.complete(role=REFLECTION, prompt=REFLECTION_PROMPT, max_tokens=400)
        except Preempted as exc:
            outcome.append(exc)

    reflecting = threading.Thread(target=reflect)
    reflecting.start()
    wait_for(lambda: _generating(one_slot_real_llm), timeout=60)
    marked = time.monotonic()
    chat_active_mark(base_url=base_url, call_id="answer")
    try:
        reflecting.join(timeout=10)
        closed = time.monotonic() - marked
        wait_for(lambda: not _slots(one_slot_real_llm)[0]["is_processing"], timeout=5)
        freed = time.monotonic() - marked
    finally:
        chat_active_clear(base_url=base_url, call_id="answer")

    (preempted,) = outcome
    assert preempted.generated > 0
    # At once, not after the seconds the rest of its 400 tokens take: a check is every 0.05 s,
    # and a machine busy with other tests (and this server's threads) adds its own delays.
    assert closed < 1.0, "the stream closed within a check or two of the answer's mark"
    assert freed < 2.0, "llama-server stopped generating and freed its slot"


def _chat() -> Conversation:
    # Titled and temporary: its turns start no title and no reflection of their own.
    return Conversation.objects.create(owner=_user(), title="The sea", temporary=True)


def _user():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="preempting")


async def _first_token(chat: Conversation) -> float:
    """One turn of `chat` through Thalamus's own streaming path: seconds to its first text."""
    started = time.monotonic()
    reply = await sync_to_async(
        lambda: services.message_send(conversation=chat, content=QUESTION).reply
    )()
    first = None
    async for text in answer_saved_reply(reply_id=reply.pk):
        if text and first is None:
            first = time.monotonic() - started
    return first


def _stated(said: str) -> Message:
    """A finished exchange in a conversation of its own, waiting for its reflection."""
    conversation = Conversation.objects.create(owner=_user(), title="About me")
    asked = Message.objects.create(conversation=conversation, role="user", content=said)
    return Message.objects.create(
        conversation=conversation, role="assistant", content="Nice to meet you.", reply_to=asked
    )


async def test_on_one_slot_an_answer_preempts_a_reflection_that_remembers_later(
    on_real_llm, one_slot_real_llm, celery_worker, django_user_model
):
    await sync_to_async(django_user_model.objects.create)(username="preempting")
    await sync_to_async(on_real_llm)(
        llm_base_url=one_slot_real_llm.url,
        answer_max_tokens=24,
        critic_enabled=False,
        reflection_quiet_seconds=0,
    )
    chat = await sync_to_async(_chat)()
    await _first_token(chat)  # the process's first turn loads what turns load
    idle = [await _first_token(chat) for _ in range(2)]
    reply = await sync_to_async(_stated)("My name is Laura and I live in Turin.")

    reflecting = await sync_to_async(tasks.reflect.delay)(reply.pk)
    # Generating: llama.cpp stops a request it is still reading the prompt of only at the end of
    # the prompt batch (-b, 2,048 tokens), seconds on a loaded CPU (bench/README.md).
    await sync_to_async(wait_for)(lambda: _generating(one_slot_real_llm), 60)
    during = await _first_token(chat)
    await sync_to_async(reflecting.get)(timeout=60)

    # Not the reflection's seconds: the check for an answer (50 ms), the server stopping,
    # bringing the chat's cached prompt back from its RAM cache, and this test's worker thread
    # beside the answer in one process.
    assert during < max(idle) + 1.0, (during, idle)
    outcome = await sync_to_async(wait_for)(
        lambda: Message.objects.get(pk=reply.pk).trace.get("reflection"), 120
    )
    assert "error" not in outcome, outcome
    memories = await sync_to_async(
        lambda: list(MemoryNode.objects.filter(owner__username="preempting"))
    )()
    assert any("Turin" in memory.description for memory in memories)
    assert f'kind="{Preempted.kind}"' in metrics_text().decode()
