from __future__ import annotations

import time

import pytest

from apps.chat.models import Conversation, Message
from apps.cognition import tasks


def wait_for(predicate, timeout: float = 45.0):
    """Until `predicate` returns something true, which it returns. What it waits for is
    background work, which a loaded machine (three test workers on two cores) slows."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def no_backoff(monkeypatch):
    """No wait between the attempts at a task whose replies were unusable (5 s, doubling, with
    full jitter): a test of what the attempts do, not of when they come."""
    monkeypatch.setattr(tasks, "INVALID_REPLY_BACKOFF", 0)


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


# A phrase of the extraction prompt (prompts/extract.txt) a scripted reply matches on.
EXTRACT = "word for word"


def reflection(*quotes: str, **by_message: list[str]) -> dict:
    """The extraction's scripted reply: `quotes` of the first user message, or lists of quotes
    by message key (message_2=[...])."""
    return {"json": {"message_1": list(quotes), **by_message}, "match": EXTRACT}


def verdict(verdict: str, debate: str = "Against: thin. For: the user said so.", **extra) -> dict:
    return {
        "json": {"debate": debate, "verdict": verdict, **extra},
        "match": "sceptical critic",
    }
