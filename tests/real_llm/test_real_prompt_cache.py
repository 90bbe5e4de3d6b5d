"""The real server's prompt cache holds the conversation (issue #26, item 2): from the second
turn on, llama-server evaluates only the new message, the note memory put before it and the
template's few tokens, by its own count (timings.prompt_n)."""

from __future__ import annotations

import httpx
import pytest
from asgiref.sync import sync_to_async

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition.pipeline import answer_saved_reply
from apps.memory import services as memory_services

pytestmark = [pytest.mark.real_llm, pytest.mark.django_db(transaction=True)]

CONVERSATION = [
    "My name is Laura and I live in Turin.",
    "I work as a carpenter, mostly making tables and chairs.",
    "Where do I live?",
    "What do I do for a living?",
]
# The template's markers around the message and the answer before it, re-read as text.
SLACK = 64


def _tokens(server, text: str) -> int:
    return len(httpx.post(f"{server.root}/tokenize", json={"content": text}).json()["tokens"])


async def _turn(conversation: Conversation, text: str) -> Message:
    reply = await sync_to_async(
        lambda: services.message_send(conversation=conversation, content=text).reply
    )()
    async for _ in answer_saved_reply(reply_id=reply.pk):
        pass
    return await Message.objects.aget(pk=reply.pk)


async def test_after_the_first_turn_the_server_evaluates_only_the_new_part(
    user, on_real_llm, real_llm
):
    await sync_to_async(on_real_llm)(answer_max_tokens=32, reflection_enabled=False)
    await sync_to_async(memory_services.memory_node_create)(
        owner=user, description="The user's daughter Sofia is allergic to peanuts", source="admin"
    )
    await sync_to_async(memory_services.memory_node_create)(
        owner=user, description="The user prefers short answers", source="admin"
    )
    conversation = await Conversation.objects.acreate(owner=user)

    replies = [await _turn(conversation, text) for text in CONVERSATION]

    assert all(reply.status == Message.Status.COMPLETE for reply in replies)
    assert any("note" in reply.trace for reply in replies[:-1]), "a note was replayed"
    # The first turn's prompt may share its start with an earlier test's: the server is shared.
    for text, reply in zip(CONVERSATION[1:], replies[1:], strict=True):
        note = (reply.trace.get("note") or {}).get("text", "")
        allowed = _tokens(real_llm, text) + (_tokens(real_llm, note) if note else 0) + SLACK
        evaluated = reply.trace["prompt_cache"]["evaluated"]
        assert evaluated <= allowed, (text, evaluated, allowed)
        assert reply.trace["prompt_cache"]["cached"] >= reply.prompt_tokens - allowed
