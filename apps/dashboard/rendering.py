"""The dashboard's fragments; the page and the websocket render the same partials."""

from __future__ import annotations

import json

from django.template.loader import render_to_string
from django.utils.html import escape

from apps.dashboard import selectors


def render_counters(*, counters: dict[str, int], oob: bool = False) -> str:
    return render_to_string("dashboard/_counters.html", {"counters": counters, "oob": oob})


def render_write_rate(*, scope: selectors.MindScope, oob: bool = False) -> str:
    return render_to_string(
        "dashboard/_write_rate.html",
        {
            "writes": selectors.memory_write_rates(owner_id=scope.owner_id),
            "all_users": scope.owner_id is None,
            "mind": scope,
            "oob": oob,
        },
    )


def render_events_oob(events, *, scope: selectors.MindScope) -> str:
    if not events:
        return ""
    items = "".join(
        render_to_string("dashboard/_event.html", {"event": e, "mind": scope}) for e in events
    )
    return f'<ol id="mind-stream" hx-swap-oob="afterbegin">{items}</ol>'


def render_graph_delta(delta: dict) -> str:
    return f'<div id="graph-delta" hidden data-delta="{escape(json.dumps(delta))}"></div>'


def render_refresh(
    *, scope: selectors.MindScope, graph_before: dict, graph_limit: int, after_event_id: int
) -> tuple[str, dict, int]:
    """Everything new since the last push: (html, the graph now shown, the newest event id)."""
    events = selectors.mind_events(scope=scope, after_id=after_event_id)
    graph = selectors.mind_graph(scope=scope, limit=graph_limit)
    html = (
        render_events_oob(events, scope=scope)
        + render_counters(counters=selectors.mind_counters(scope=scope), oob=True)
        + render_write_rate(scope=scope, oob=True)
        + render_graph_delta(selectors.graph_delta(graph_before, graph))
    )
    newest = max([after_event_id, *(event.pk for event in events)])
    return html, graph, newest
