from __future__ import annotations

import time

import pytest

from apps.chat.models import Conversation, Message


def wait_for(predicate, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def turn(user):
    """A saved exchange: make_turn("I moved to Rome", "Nice!") -> the assistant reply."""
    conversation = Conversation.objects.create(owner=user)

    def make_turn(question: str, answer: str, conversation=conversation) -> Message:
        asked = Message.objects.create(
            conversation=conversation, role=Message.Role.USER, content=question
        )
        return Message.objects.create(
            conversation=conversation,
            role=Message.Role.ASSISTANT,
            content=answer,
            reply_to=asked,
        )

    return make_turn


def memory(description: str, **extra) -> dict:
    return {
        "action": "add",
        "description": description,
        "kind": "fact",
        "topic": "",
        "fact_key": "",
        "importance": 0.5,
        **extra,
    }


def reflection(memories=(), triples=(), plan=()) -> dict:
    return {
        "json": {
            "memories": list(memories),
            "triples": list(triples),
            "next_retrieval_plan": list(plan),
        },
        "match": "reflective memory",
    }


def verdict(verdict: str, debate: str = "Against: thin. For: the user said so.", **extra) -> dict:
    return {
        "json": {"debate": debate, "verdict": verdict, **extra},
        "match": "sceptical critic",
    }
