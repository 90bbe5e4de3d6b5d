"""A whole conversation with a weak local model, as llama.cpp with a small GGUF serves it.

The stub behaves like that server: a 4,096-token window it refuses to exceed, no end of
sequence (every reply runs on until max_tokens), 26 tokens a second (SmolLM2-135M on two CPU
cores), one request at a time.
Twelve turns over the real websocket consumer and a real Celery worker, one of them a
6,000-character paste, most stating a fact about the user. Memory must form from what the user
said, never from what the assistant wrote, and nothing may overflow, run away or fail.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.sync import sync_to_async

from apps.chat.models import Conversation, Message
from apps.memory.models import MemoryNode
from tests.chat.conftest import connect_socket
from tests.cognition.weak_conversation import (
    ANSWER_CAP,
    BACKGROUND_CAP,
    CONTEXT,
    TOKENS_PER_SECOND,
    TURNS,
    script,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def _turn(communicator, text: str) -> None:
    await communicator.send_to(text_data=json.dumps({"action": "send", "content": text}))
    async with asyncio.timeout(60):
        while True:
            frame = await communicator.receive_from(60)
            if "msg-assistant complete" in frame or "msg-assistant failed" in frame:
                return


def _wait_for_reflections(replies: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = Message.objects.filter(pk__in=replies, trace__has_key="reflection").count()
        if done == len(replies):
            return
        time.sleep(0.5)
    raise AssertionError(f"{done} of {len(replies)} turns reflected in {timeout} s")


@pytest.mark.timeout(400)
async def test_a_weak_local_model_keeps_every_promise(user, llm_stub, config, celery_worker):
    await sync_to_async(config)(
        context_tokens=8192,  # the server's /props says 4,096; that must win
        answer_max_tokens=ANSWER_CAP,
        background_max_tokens=BACKGROUND_CAP,
        critic_enabled=False,
        turns_per_minute=0,
    )
    llm_stub.set_defaults(
        server="llamacpp",
        context=CONTEXT,
        overflow="reject",
        eos=False,
        tps=TOKENS_PER_SECOND,
        slots=1,
    )
    script(llm_stub)
    conversation = await Conversation.objects.acreate(owner=user, title="weak model")
    communicator = await connect_socket(user, conversation.pk)
    for message, _, _ in TURNS:
        await _turn(communicator, message)
    await communicator.disconnect()

    replies = [
        reply
        async for reply in Message.objects.filter(
            conversation=conversation, role=Message.Role.ASSISTANT
        ).order_by("pk")
    ]
    assert len(replies) == len(TURNS)
    # Every reply ends complete or cut at its cap, never failed.
    assert [r.status for r in replies] == [Message.Status.COMPLETE] * len(TURNS), [
        (r.status, r.error) for r in replies
    ]
    assert {r.finish_reason for r in replies} <= {"stop", "length", "loop"}
    assert all(r.completion_tokens <= ANSWER_CAP for r in replies)

    await sync_to_async(_wait_for_reflections)([r.pk for r in replies], timeout=240)

    # No request exceeded the window, every one asked for a capped reply, none ran past it.
    chats = [r for r in llm_stub.requests if r["path"].endswith("/chat/completions")]
    assert chats and all(r["prompt_tokens"] < CONTEXT for r in chats)
    assert all(r["body"].get("max_tokens") for r in chats)
    assert all(r["completion_tokens"] <= r["body"]["max_tokens"] for r in chats)

    # A memory formed for each turn that stated a fact, quoting the user.
    for (_, fact, _), reply in zip(TURNS, replies, strict=True):
        formed = [
            node async for node in MemoryNode.objects.filter(owner=user, source_message=reply)
        ]
        if fact is None:
            continue
        assert formed, f"no memory from {fact!r}: {reply.trace.get('reflection')}"
        assert any(node.source == "user" and fact in node.quote for node in formed)

    # None came from the assistant's words.
    answers = " ".join(r.content for r in replies)
    async for node in MemoryNode.objects.filter(owner=user):
        assert node.description not in answers, node.description
    assert not await MemoryNode.objects.filter(description__icontains="Barbera").aexists()
    assert not await MemoryNode.objects.filter(description__icontains="GNU debugger").aexists()
