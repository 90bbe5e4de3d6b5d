"""One confidence scale on every page: a fact's 0 to 1, in percent, and a memory's score on it
as the recall weighs it; the Facts page names each relation."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps.memory import graph_services, services
from apps.memory.models import confidence_share, score_at_least, score_at_most

pytestmark = pytest.mark.django_db


def test_a_memorys_score_maps_onto_the_facts_scale_as_recall_weighs_it():
    assert [round(confidence_share(score), 2) for score in (-3, 0, 1, 2, 6)] == [
        0.0,
        0.0,
        0.33,
        0.5,
        0.75,
    ]
    # The browser's percent bounds are the scores whose share lies within them.
    for percent in range(1, 100):
        low, high = score_at_least(percent), score_at_most(percent)
        assert confidence_share(low) * 100 >= percent > confidence_share(low - 1) * 100
        assert confidence_share(high) * 100 <= percent < confidence_share(high + 1) * 100


def test_every_page_shows_confidence_in_percent_and_facts_their_relation(client, admin_user):
    node = services.memory_node_create(
        owner=admin_user,
        description="Alice keeps bees",
        embed=False,
        confidence_score=2,
        source="admin",
    )
    triple = graph_services.triple_upsert(
        owner=admin_user, subject="user", predicate="lives_in", object="Turin", confidence=0.8
    )
    client.force_login(admin_user)

    memories = client.get(reverse("memory:list")).content.decode()
    facts = client.get(reverse("memory:knowledge")).content.decode()
    node_admin = client.get(reverse("admin:memory_memorynode_changelist")).content.decode()
    triple_admin = client.get(reverse("admin:memory_triple_changelist")).content.decode()

    assert ">50%</td>" in memories.split(f'id="memory-{node.pk}"')[1]
    row = facts.split(f'id="triple-{triple.pk}"')[1].split("</tr>")[0]
    assert re.search(r'<td class="triple-relation"[^>]*>Lives in</td>', row)
    assert re.search(r'<td class="confidence"[^>]*>80%</td>', row)
    assert "50% (score 2)" in node_admin
    assert ">80%<" in triple_admin
