"""The background budget (#38 item 4): a conversation and its quiet period cost at most two
background LLM requests per user turn, and its title is asked for once."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from asgiref.sync import sync_to_async

from apps.chat.models import Conversation, Message
from tests.chat.conftest import connect_socket, receive_until, send_action

pytestmark = pytest.mark.django_db(transaction=True)

# What a new user says in a first conversation: who they are, a preference, questions.
TURNS = [
    "Hi! My name is Laura and I live in Turin.",
    "I work as a carpenter, mostly making tables and chairs for restaurants.",
    "Could you answer in bullet points from now on?",
    "Which wood is best for a kitchen table?",
    "My sister Anna is visiting me next week with her two kids.",
    "Thanks, that is helpful.",
]
TITLE_PROMPT = "Write a short title"
QUIET_SECONDS = 4


def _chat_requests(llm_stub) -> list[dict]:
    return [r for r in llm_stub.requests if r["path"].endswith("/chat/completions")]


def _is_answer(request: dict) -> bool:
    body = request["body"]
    return "response_format" not in body and "You are Thalamus" in body["messages"][0]["content"]


def _is_title(request: dict) -> bool:
    return TITLE_PROMPT in request["body"]["messages"][-1]["content"]


async def _settled(llm_stub, conversation: Conversation) -> None:
    """Until the last reply is reflected on, once the conversation is quiet, and then no
    request has reached the stub for QUIET_SECONDS (the background work is done): a loaded
    machine may pause longer than that before the last reflection."""
    last = Message.objects.filter(conversation=conversation, role="assistant").order_by("-pk")
    async with asyncio.timeout(120):
        while "reflection" not in (await last.afirst()).trace:
            await asyncio.sleep(0.2)
        seen, since = len(llm_stub.requests), time.monotonic()
        while time.monotonic() - since < QUIET_SECONDS:
            await asyncio.sleep(0.2)
            if len(llm_stub.requests) != seen:
                seen, since = len(llm_stub.requests), time.monotonic()


async def test_a_conversation_and_its_quiet_period_cost_at_most_two_background_requests_a_turn(
    user, llm_stub, celery_worker, config
):
    await sync_to_async(config)(reflection_quiet_seconds=1)
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    for text in TURNS:
        await send_action(communicator, action="send", content=text)
        await receive_until(communicator, "msg-assistant complete", timeout=30)
        # The user reads the answer and types the next message.
        await asyncio.sleep(1.5)
    await communicator.disconnect()

    await _settled(llm_stub, conversation)

    requests = _chat_requests(llm_stub)
    answers = [r for r in requests if _is_answer(r)]
    background = [r for r in requests if not _is_answer(r)]
    assert len(answers) == len(TURNS)
    per_turn = len(background) / len(TURNS)
    kinds = sorted(
        (r["body"].get("response_format") or {}).get("json_schema", {}).get("name", "title?")
        for r in background
    )
    assert per_turn <= 2, f"{per_turn:.2f} background requests a turn: {kinds}"
    assert sum(_is_title(r) for r in background) == 1, "the title is asked for once"
    assert (await Conversation.objects.aget(pk=conversation.pk)).title


def test_the_title_is_asked_for_once_when_its_tasks_overlap(user, llm_stub):
    from apps.chat.tasks import title_conversation

    conversation = Conversation.objects.create(owner=user)
    Message.objects.create(conversation=conversation, role="user", content="Tables in oak?")
    Message.objects.create(conversation=conversation, role="assistant", content="Oak is good.")
    llm_stub.script({"content": "Oak tables", "match": TITLE_PROMPT, "ttft": 1.0})
    # Each reply until the title lands queues the task; a worker pool runs them side by side.
    runs = [threading.Thread(target=title_conversation, args=(conversation.pk,)) for _ in "abc"]
    for run in runs:
        run.start()
    for run in runs:
        run.join()

    asked = [r for r in _chat_requests(llm_stub) if _is_title(r)]
    assert len(asked) == 1
    conversation.refresh_from_db()
    assert conversation.title == "Oak tables" and conversation.title_asked_at is not None


def test_the_world_modifier_queues_with_the_other_background_llm_calls(settings):
    # One worker's concurrency (THALAMUS_BACKGROUND_CONCURRENCY) bounds the LLM calls at once.
    for task in ("cognition.change_world", "apps.chat.tasks.title_conversation"):
        assert settings.CELERY_TASK_ROUTES[task] == {"queue": settings.THALAMUS_BACKGROUND_QUEUE}
