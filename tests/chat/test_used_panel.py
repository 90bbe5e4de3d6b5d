"""The "What I used" panel in plain words: the memories an answer used and why each was chosen,
from its trace; the scores and times behind a closed "Details"."""

from __future__ import annotations

import re

import pytest
from django.template.loader import render_to_string

from apps.chat.models import Conversation, Message
from apps.chat.recall import Recalled, panel_items
from apps.memory import services

pytestmark = pytest.mark.django_db


def _why(item: dict, text: str = "Alice keeps bees", said: str = "") -> str:
    recalled = Recalled(memories={1: text}, episodes={}, triples={})
    [used] = panel_items({"memory": {"memories": [{"id": 1, **item}]}}, recalled, said)["memories"]
    return used.why


def test_each_memory_says_why_it_was_chosen_from_its_scores():
    words = {"components": {"text": 1.0, "vector": 0.2, "recency": 0.1}}
    assert _why(words, said="Do you remember my bees?") == "Matched your words “bees”"
    assert _why(words, said="my hive") == "Matched words of your message"  # a stem, not a word
    meaning = {"components": {"text": 0.0, "vector": 0.71, "recency": 0.1}}
    assert _why(meaning, said="insects") == "Similar in meaning to your message"
    recent = {"components": {"text": 0.0, "vector": 0.62, "recency": 0.95}}
    assert _why(recent) == "Similar in meaning to your message; recent"
    neighbour = {"components": {"text": 0.0, "vector": 0.1, "recency": 0.1}, "context": 0.4}
    assert _why(neighbour) == "Said together with another memory that matched"
    shared = {"components": {"vector": 0.8}, "global": True}
    assert (
        _why(shared)
        == "Similar in meaning to your message; shared knowledge, not a memory of yours"
    )
    assert _why({"components": {}}) == "One of the best matches I had"


def test_the_panel_opens_on_what_was_used_with_scores_and_times_behind_details(user, llm_stub):
    bees = services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    conversation = Conversation.objects.create(owner=user)
    question = Message.objects.create(
        conversation=conversation, role="user", content="How are my bees?"
    )
    answer = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        reply_to=question,
        content="Fine.",
        trace={
            "memory": {
                "route": "fast",
                "memories": [
                    {"id": bees.pk, "score": 0.81, "components": {"text": 1.0, "vector": 0.3}}
                ],
                "timings_ms": {"embed": 3.21},
            },
            "history_messages": 2,
            "timings_ms": {"llm": 120.0},
        },
    )

    html = render_to_string("chat/_trace.html", {"message": answer})

    used, details = html.split('<details class="trace-details">')
    assert "Alice keeps bees" in used and "Matched your words “bees”" in used
    assert "I also read the last 2 messages of this chat." in used
    # No number of the machinery before the toggle: no score, no milliseconds.
    assert "0.81" not in used and " ms" not in used
    assert "(0.81)" in details and "llm 120 ms" in details and "embed 3.2 ms" in details
    assert re.match(r"\s*<summary>Details</summary>", details), "closed until asked"
