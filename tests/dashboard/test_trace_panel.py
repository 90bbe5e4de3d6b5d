"""The chat's "what I used" panel: what an answer recalled, read by id, with each step's time."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string

from apps.chat.models import Conversation, Message
from apps.memory import forget_services, graph_services, services
from apps.memory.models import Episode

pytestmark = pytest.mark.django_db


def test_the_panel_lists_route_memories_episodes_triples_and_step_times(user, llm_stub):
    bees = services.memory_node_create(owner=user, description="Alice keeps bees", source="admin")
    honey = graph_services.triple_upsert(
        owner=user, subject="user", predicate="likes", object="honey"
    )
    conversation = Conversation.objects.create(owner=user)
    hives = Episode.objects.create(
        owner=user, conversation=conversation, summary="Planned the hives"
    )
    message = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content="ok",
        ttft_ms=80,
        trace={
            "memory": {
                "route": "recollection",
                "reason": "asks about the past",
                "memories": [{"id": bees.pk, "score": 0.81}],
                "episodes": [{"id": hives.pk, "score": 0.5}],
                "triples": [{"id": honey.pk, "category": "preferences", "global": False}],
                "timings_ms": {"embed": 3.21, "memories": 4.5},
            },
            "history_messages": 2,
            "timings_ms": {"memory": 9.0, "llm": 120.0},
        },
    )
    html = render_to_string("chat/_trace.html", {"message": message})
    for text in (
        "recollection",
        "Alice keeps bees",
        "(0.81)",
        "Planned the hives",
        "honey",
        "embed 3.2 ms",
        "llm 120 ms",
        "first token 80 ms",
    ):
        assert text in html, text

    # A memory forgotten since is gone from the panel of every answer that used it.
    forget_services.memories_forget(node_ids=[bees.pk])
    assert "Alice keeps bees" not in render_to_string("chat/_trace.html", {"message": message})


def test_another_users_memory_named_in_a_trace_is_never_shown(user, other_user, llm_stub):
    theirs = services.memory_node_create(
        owner=other_user, description="Mallory's secret plan", source="admin"
    )
    conversation = Conversation.objects.create(owner=user)
    message = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content="ok",
        trace={"memory": {"memories": [{"id": theirs.pk, "score": 0.9}]}, "timings_ms": {}},
    )

    assert "secret plan" not in render_to_string("chat/_trace.html", {"message": message})
