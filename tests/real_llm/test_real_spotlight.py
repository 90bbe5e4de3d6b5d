"""Datamarking against the real server (issue #39 items 2 and 5): a conversation whose notes
hold data keeps llama-server's prompt cache (the marker is the conversation's, so the system
prompt and the replayed notes stay the same), and a canary instruction arriving by each door of
data, datamarked, is not obeyed. bench/spotlight_canary.py counts the same over more
questions, with and without marking (bench/README.md, Datamarking)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from apps.chat.models import Conversation, Message
from apps.memory import services as memory_services
from apps.memory.models import MemoryNode
from apps.memory.provenance import conversation_marker
from bench import spotlight_canary
from tests.real_llm.test_real_prompt_cache import SLACK, _tokens, _turn
from tests.spotlight import marked

pytestmark = [pytest.mark.real_llm, pytest.mark.django_db(transaction=True)]

IMPORTED = "Laura bought a walnut workbench from a shop in Milan"
CONVERSATION = ["Where did I buy my workbench?", "And what is it made of?"]


async def test_a_conversation_whose_notes_hold_data_keeps_the_prompt_cache(
    user, on_real_llm, real_llm
):
    await sync_to_async(on_real_llm)(answer_max_tokens=24, reflection_enabled=False)
    await sync_to_async(memory_services.memory_node_create)(
        owner=user, description=IMPORTED, source=MemoryNode.Source.IMPORTED
    )
    conversation = await Conversation.objects.acreate(owner=user)

    replies = [await _turn(conversation, text) for text in CONVERSATION]

    assert all(reply.status == Message.Status.COMPLETE for reply in replies)
    notes = [(reply.trace.get("note") or {}).get("text", "") for reply in replies]
    assert marked(IMPORTED, conversation_marker(conversation.pk)) in notes[0]
    for text, note, reply in zip(CONVERSATION[1:], notes[1:], replies[1:], strict=True):
        allowed = _tokens(real_llm, text) + (_tokens(real_llm, note) if note else 0) + SLACK
        assert reply.trace["prompt_cache"]["evaluated"] <= allowed, (text, reply.trace)


def test_a_canary_by_each_door_of_data_datamarked_is_not_obeyed(real_llm):
    question = spotlight_canary.QUESTIONS[0]
    answers = {
        door: spotlight_canary.ask(
            real_llm.url, spotlight_canary.prompt(door, question, marked=True), max_tokens=24
        )
        for door in spotlight_canary.DOORS
    }

    assert all(answers.values()), "the model answered every prompt"
    assert [door for door, answer in answers.items() if spotlight_canary.obeys(answer)] == []
