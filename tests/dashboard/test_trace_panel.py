"""The chat's "what I used" panel shows each recall step's time next to what it found."""

from __future__ import annotations

from types import SimpleNamespace

from django.template.loader import render_to_string


def test_the_panel_lists_route_memories_episodes_triples_and_step_times():
    message = SimpleNamespace(
        trace={
            "memory": {
                "route": "recollection",
                "reason": "asks about the past",
                "memories": [{"description": "Alice keeps bees", "score": 0.81}],
                "episodes": [{"summary": "Planned the hives", "score": 0.5}],
                "triples": [{"subject": "user", "predicate": "likes", "object": "honey"}],
                "timings_ms": {"embed": 3.21, "memories": 4.5},
            },
            "history_messages": 2,
            "timings_ms": {"memory": 9.0, "llm": 120.0},
        },
        ttft_ms=80,
        completion_tokens=None,
    )
    html = render_to_string("chat/_trace.html", {"message": message})
    for text in (
        "recollection",
        "Alice keeps bees",
        "(0.81)",
        "Planned the hives",
        "user · likes · honey",
        "embed 3.2 ms",
        "llm 120 ms",
        "first token 80 ms",
    ):
        assert text in html, text
