"""Reflection with the real SmolLM2-135M: what a user states about themselves becomes memories,
whether the turns are reflected on together (one call) or one by one."""

from __future__ import annotations

import json

import httpx
import pytest

from apps.chat.models import Conversation, Message
from apps.cognition import grounding
from apps.cognition.reflection import reflect_on_replies
from apps.cognition.schemas import (
    QUOTES_PER_MESSAGE,
    message_key,
    quote_max_chars,
    stated_quotes_max_tokens,
    stated_quotes_schema,
)
from apps.memory.models import MemoryNode
from apps.memory.services import says_the_same

pytestmark = [pytest.mark.real_llm, pytest.mark.django_db(transaction=True)]

# What the user says, and answers that guess at things the user never said.
CONVERSATION = [
    ("My name is Laura Bianchi and I live in Turin", "Nice to meet you! Are you a chef in Rome?"),
    ("I work as a carpenter in a small workshop", "You must love opera and fast cars."),
    ("I prefer short answers", "Understood, I will write long essays about jazz."),
    ("My daughter Sofia is allergic to peanuts", "Your son Marco is allergic to cats."),
    ("What should I cook for dinner tonight?", "A risotto with mushrooms."),
    ("Can you suggest a good book?", "Try a novel by Italo Calvino."),
]
FACTS = {
    "name Laura Bianchi": lambda text: "laura bianchi" in text and "name" in text,
    "lives in Turin": lambda text: "turin" in text and "live" in text,
    "carpenter": lambda text: "carpenter" in text,
    "prefers short answers": lambda text: "short answers" in text and "prefer" in text,
    "Sofia allergic to peanuts": lambda text: "sofia" in text and "peanut" in text,
}
ASSISTANT_ONLY = ("chef", "rome", "opera", "cars", "essays", "jazz", "marco", "cats", "calvino")


def _conversation(owner) -> list[Message]:
    conversation = Conversation.objects.create(owner=owner)
    replies = []
    for said, answered in CONVERSATION:
        asked = Message.objects.create(conversation=conversation, role="user", content=said)
        replies.append(
            Message.objects.create(
                conversation=conversation,
                role="assistant",
                content=answered,
                reply_to=asked,
                status=Message.Status.COMPLETE,
            )
        )
    return replies


def _learnt(owner) -> tuple[set[str], list[MemoryNode]]:
    nodes = list(MemoryNode.objects.filter(owner=owner, valid_to=None))
    texts = [node.description.casefold() for node in nodes]
    return {fact for fact, holds in FACTS.items() if any(holds(text) for text in texts)}, nodes


def _assert_only_the_users_words(nodes: list[MemoryNode]) -> None:
    said = [user_said for user_said, _ in CONVERSATION]
    for node in nodes:
        assert not any(word in grounding.words(node.description) for word in ASSISTANT_ONLY)
        assert node.source == MemoryNode.Source.USER
        assert any(grounding.quote_found(quote=node.quote, text=text) for text in said), node


def _assert_no_duplicates(nodes: list[MemoryNode]) -> None:
    """SmolLM2 says "Sofia is allergic to peanuts" several times in one reply: one memory."""
    for index, node in enumerate(nodes):
        for other in nodes[index + 1 :]:
            assert not says_the_same(node.description, other.description), (node, other)


def test_the_whole_conversation_reflected_on_in_one_call_teaches_what_the_user_stated(
    user, on_real_llm
):
    on_real_llm(critic_enabled=False)
    replies = _conversation(user)

    outcomes = reflect_on_replies(reply_ids=[reply.pk for reply in replies])

    found, nodes = _learnt(user)
    assert len(found) >= 4, (found, [node.description for node in nodes])
    _assert_only_the_users_words(nodes)
    _assert_no_duplicates(nodes)
    assert set(outcomes) == {reply.pk for reply in replies}
    assert [outcomes[reply.pk]["stated"] for reply in replies] == [True] * 4 + [False] * 2


def test_each_turn_reflected_on_alone_teaches_what_the_user_stated(user, on_real_llm):
    on_real_llm(critic_enabled=False)

    for reply in _conversation(user):
        reflect_on_replies(reply_ids=[reply.pk])

    found, nodes = _learnt(user)
    assert len(found) >= 4, (found, [node.description for node in nodes])
    _assert_only_the_users_words(nodes)
    _assert_no_duplicates(nodes)


@pytest.mark.parametrize(
    "said",
    [
        ["Thanks, that is all for now."],
        [text for text, _ in CONVERSATION],
        ["My son Marco plays the violin and the piano every evening after school, " * 2] * 6,
    ],
    ids=["one short message", "the conversation", "six long messages"],
)
def test_the_longest_reply_the_schema_allows_fits_the_calls_max_tokens(real_llm, said):
    # SmolLM2-135M has filled every quote to its limit with one phrase ("I'm a mom. I'm a mom…"):
    # that reply, in the model's own tokens, must end within the call's max_tokens, or the JSON
    # is cut inside a string and the whole reply lost.
    quote_chars = quote_max_chars(said)
    schema = stated_quotes_schema(len(said), quote_chars)
    looping = ("I'm a mom. " * 20)[:quote_chars]
    reply = json.dumps(
        {message_key(index): [looping] * QUOTES_PER_MESSAGE for index in range(len(said))},
        indent=2,
    )
    schema.model_validate_json(reply)  # the longest reply the schema allows
    tokens = httpx.post(f"{real_llm.root}/tokenize", json={"content": reply}, timeout=10)
    assert len(tokens.json()["tokens"]) <= stated_quotes_max_tokens(len(said), quote_chars)
