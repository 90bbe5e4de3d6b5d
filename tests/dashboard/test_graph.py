"""What the dashboard graph shows once a mind outgrows the cap."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.dashboard.selectors import MindScope, graph_delta, mind_graph
from apps.memory import services
from apps.memory.models import MemoryNode

pytestmark = pytest.mark.django_db


def test_beyond_the_cap_it_keeps_the_newest_and_the_hubs(user):
    old = timezone.now() - timedelta(days=30)
    nodes = [
        services.memory_node_create(
            owner=user, description=f"memory {n}", embed=False, source="admin"
        )
        for n in range(12)
    ]
    MemoryNode.objects.filter(pk__in=[n.pk for n in nodes[:4]]).update(created_at=old)
    hub = nodes[0]
    for other in nodes[1:4]:
        services.memory_link_upsert(source=other, target=hub, kind="supports", score=0.8)

    graph = mind_graph(scope=MindScope(owner_id=user.pk, label="alice", who="me"), limit=8)

    assert graph["truncated"] and len(graph["nodes"]) == 8
    assert hub.pk in graph["nodes"]
    assert nodes[-1].pk in graph["nodes"]


def test_a_delta_names_only_what_changed():
    before = {
        "nodes": {1: {"id": 1, "state": "volatile"}, 2: {"id": 2, "state": "volatile"}},
        "edges": {7: {"id": 7, "from": 1, "to": 2}},
        "truncated": False,
        "limit": 10,
    }
    after = {
        "nodes": {1: {"id": 1, "state": "promoted"}, 3: {"id": 3, "state": "volatile"}},
        "edges": {},
        "truncated": False,
        "limit": 10,
    }
    delta = graph_delta(before, after)
    assert [n["id"] for n in delta["nodes"]] == [1, 3]
    assert delta["removed_nodes"] == [2] and delta["removed_edges"] == [7]
