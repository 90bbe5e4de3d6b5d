"""Provenance in the prompt (#39 items 1 and 2): a sentence goes in by each door memory has,
then one turn; the prompts the LLM stub received show every data door's sentence datamarked,
never as written, and the user's own words as written.

Each sentence passes the keyword gate (it is about a kayak, not an order) so that it reaches
the prompt, and each hides a zero-width space and a Unicode tag character, which no prompt
may carry whatever the door.
"""

from __future__ import annotations

import pytest

from apps.chat.models import Conversation, Message
from apps.cognition.reflection import reflect_on_replies
from apps.language.text import visible
from apps.mcp_server.server import _remember
from apps.memory import browser_services, episode_services, export_services, world_services
from apps.memory.models import Episode, MemoryNode, WorldState
from apps.memory.provenance import MARKERS_SENTENCE, conversation_marker
from tests.cognition.conftest import EXTRACT
from tests.spotlight import marked, unmarked

pytestmark = pytest.mark.django_db(transaction=True)

HIDDEN = "\u200b\U000e0041"
# The user's own words: said in the chat, or written by hand in the memory browser.
OWN = {
    "chat reflection": "My kayak is painted bright orange",
    "memory browser edit": "I keep my kayak paddles in the cellar by the boiler",
}
# Data: whoever wrote it, it may inform the answer and never instruct it.
DATA = {
    "memory file": "The kayak club meets at the old harbour on Thursdays",
    "imported conversation": "I bought my first kayak in Oslo one spring",
    "MCP remember": "The user rents a kayak trailer from a neighbour",
    "episode summary": "We talked about mending a cracked kayak hull with epoxy",
    "world state by the model": "kayak trip along the coast",
}
ASKED = "Do you remember what we said last time about my kayak?"


def _hidden(text: str) -> str:
    """`text` with invisible characters inside its second word."""
    first, second, rest = text.split(" ", 2)
    return f"{first} {second[:2]}{HIDDEN}{second[2:]} {rest}"


def _reflected(user, llm_stub, text: str, *, imported: bool) -> None:
    conversation = Conversation.objects.create(owner=user)
    asked = Message.objects.create(conversation=conversation, role="user", content=_hidden(text))
    reply = Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="Noted.",
        reply_to=asked,
        trace={"imported": 1} if imported else {},
    )
    # The extractor quotes the sentence as stored (the chat's door stripped it already).
    llm_stub.script({"json": {"message_1": [asked.content]}, "match": EXTRACT})
    reflect_on_replies(reply_ids=[reply.pk])


def _through_every_door(user, llm_stub, client) -> None:
    client.force_login(user)
    # The chat's door: the message a reflection then learns from.
    said = Conversation.objects.create(owner=user)
    llm_stub.script({"content": "Orange it is."})
    client.post(f"/c/{said.pk}/send", {"content": _hidden(OWN["chat reflection"])})
    reply = Message.objects.get(conversation=said, role="assistant")
    llm_stub.script({"json": {"message_1": [OWN["chat reflection"]]}, "match": EXTRACT})
    reflect_on_replies(reply_ids=[reply.pk])

    node = browser_services.memory_node_add(
        owner=user, description="Kayak paddles somewhere", source=MemoryNode.Source.INFERRED
    )
    client.post(
        f"/memory/{node.pk}/edit",
        {
            "description": _hidden(OWN["memory browser edit"]),
            "topic": "",
            "kind": "fact",
            "importance": "0.5",
        },
    )
    export_services.memories_import(
        owner=user, data={"memories": [{"description": _hidden(DATA["memory file"])}]}
    )
    _reflected(user, llm_stub, DATA["imported conversation"], imported=True)
    _remember(user, _hidden(DATA["MCP remember"]))
    episode_services.episode_create(owner=user, summary=_hidden(DATA["episode summary"]))
    op = {"op": "append", "path": "topics", "value": _hidden(DATA["world state by the model"])}
    world_services.world_apply(user_id=user.pk, ops=[op], source="turn")


def _answer_requests(llm_stub) -> list[list[dict]]:
    return [
        request["body"]["messages"]
        for request in llm_stub.requests
        if request["path"].endswith("/chat/completions")
        and "response_format" not in request["body"]
        and "You are Thalamus" in request["body"]["messages"][0]["content"]
    ]


def test_every_door_of_data_reaches_the_prompt_datamarked_and_the_users_words_as_written(
    client, user, llm_stub, config
):
    config(critic_enabled=False, turns_per_minute=0)
    _through_every_door(user, llm_stub, client)
    config(reflection_enabled=False)
    nodes = list(MemoryNode.objects.filter(owner=user))
    sources = sorted(node.source for node in nodes)
    assert sources == ["admin", "agent", "imported", "imported", "user"]
    assert WorldState.objects.get(owner=user).proposed == [DATA["world state by the model"]]
    # The memory browser labels each memory of a data door.
    assert client.get("/memory/").content.decode().count('class="badge provenance-data"') == 3
    llm_stub.reset()

    conversation = Conversation.objects.create(owner=user)
    # The tool's door: what the current time tool returns is data too.
    llm_stub.script(
        {"tool_calls": [{"name": "current_time", "arguments": {}}]},
        {"content": "Here is what I know."},
    )
    client.post(f"/c/{conversation.pk}/send", {"content": _hidden(ASKED)})
    assert Message.objects.get(conversation=conversation, role="assistant").status == "complete"

    [messages] = _answer_requests(llm_stub)
    system, *_, question = messages
    sent = "\n".join(message["content"] for message in messages)
    marker = conversation_marker(conversation.pk)
    note, _, words = question["content"].partition("</memory>")
    assert words.strip() == ASKED, "the user's message is sent as written, hidden characters out"
    assert MARKERS_SENTENCE in system["content"] and marker in MARKERS_SENTENCE
    assert HIDDEN[0] not in sent and HIDDEN[1] not in sent
    for node in nodes:
        text = visible(node.description)
        if node.is_data:
            assert text not in sent, f"{node.source}: its words reach the prompt unmarked"
            assert marked(text, marker) in note, f"{node.source}: datamarked in the note"
        else:
            assert f"- {text}\n" in note, f"{node.source}: the user's own words, as written"
    for door in ("episode summary", "world state by the model"):
        assert DATA[door] not in sent, f"{door}: its words reach the prompt unmarked"
        assert marked(DATA[door], marker) in note, f"{door}: datamarked in the memory note"
        assert DATA[door] not in unmarked(system["content"]), f"{door}: in the system prompt"
    [tool] = [line for line in note.splitlines() if line.startswith("- [current_time]")]
    assert " " not in tool.removeprefix("- [current_time] ").rsplit(" (", 1)[0]
    # Stripped where they came in: the chat, the memory browser, MCP, the world state.
    for door in ("chat reflection", "memory browser edit"):
        assert OWN[door] in [node.quote or node.description for node in nodes]
    assert DATA["MCP remember"] in [node.description for node in nodes]
    # And every memory and episode, whatever door it came by.
    stored = [text for node in nodes for text in (node.description, node.quote)]
    stored += Episode.objects.filter(owner=user).values_list("summary", flat=True)
    assert [text for text in stored if HIDDEN[0] in text or HIDDEN[1] in text] == []


def test_an_imported_conversation_continued_here_is_sent_as_data(client, user, llm_stub, config):
    config(critic_enabled=False, reflection_enabled=False, turns_per_minute=0)
    conversation = Conversation.objects.create(owner=user)
    imported = ["How do I sharpen a chisel?", "Use a whetstone at a steady angle of 25 degrees."]
    for role, text in zip(["user", "assistant"], imported, strict=True):
        Message.objects.create(
            conversation=conversation, role=role, content=text, trace={"imported": 1}
        )
    client.force_login(user)
    llm_stub.script({"content": "Any fine stone will do."})

    client.post(f"/c/{conversation.pk}/send", {"content": "Which stone should I buy?"})

    [messages] = _answer_requests(llm_stub)
    marker = conversation_marker(conversation.pk)
    assert [m["content"] for m in messages[1:3]] == [marked(text, marker) for text in imported]
    assert messages[-1]["content"] == "Which stone should I buy?", "the user's own, as written"
