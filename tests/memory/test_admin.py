from __future__ import annotations

import pytest
from django.urls import reverse

from apps.core.models import Event
from apps.memory import critique_services, graph_services, services
from apps.memory.models import MemoryLink, MemoryNode, Triple

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_outbound_in_atomic")]


@pytest.fixture
def many_memories(user, other_user):
    nodes = []
    for owner in (user, other_user, None):
        for n in range(15):
            nodes.append(
                services.memory_node_create(
                    owner=owner,
                    description=f"memory {n} of {owner or 'everyone'}",
                    confidence_score=n - 2,
                    embed=False,
                    source="admin",
                )
            )
            graph_services.triple_upsert(
                owner=owner, subject="user", predicate="likes", object=f"t{n}"
            )
    for a, b in zip(nodes, nodes[1:], strict=False):
        services.memory_link_upsert(source=a, target=b, kind="similar", score=0.5)
    for node in nodes[:20]:
        critique_services.critique_record(
            node_id=node.pk, message=None, verdict="withstands", debate=f"Debate on {node.pk}"
        )
    return nodes


@pytest.mark.parametrize(
    "model",
    ["memorynode", "triple", "episode", "memorylink", "predicate", "critique"],
)
def test_each_memory_changelist_costs_a_bounded_number_of_queries(
    admin_client, many_memories, model, django_assert_max_num_queries
):
    url = reverse(f"admin:memory_{model}_changelist")
    with django_assert_max_num_queries(12):
        response = admin_client.get(url)
    assert response.status_code == 200


def test_the_event_changelist_costs_a_bounded_number_of_queries(
    admin_client, user, django_assert_max_num_queries
):
    from apps.core.services import event_record

    for n in range(40):
        event_record(kind="perception", summary=f"noticed {n}", owner=user if n % 2 else None)
    with django_assert_max_num_queries(12):
        response = admin_client.get(reverse("admin:core_event_changelist"))
    assert response.status_code == 200
    assert b"noticed 39" in response.content


def test_filters_narrow_by_owner_confidence_and_search(admin_client, user, many_memories):
    url = reverse("admin:memory_memorynode_changelist")
    response = admin_client.get(url, {"owner": "global", "confidence": "high"})
    shown = list(response.context["cl"].queryset)
    assert shown and all(n.owner_id is None and n.confidence_score >= 6 for n in shown)

    response = admin_client.get(url, {"owner": str(user.pk), "q": "memory 13"})
    assert [n.description for n in response.context["cl"].queryset] == ["memory 13 of alice"]


def test_a_memory_added_in_the_admin_goes_through_the_services_and_is_announced(
    admin_client, user, llm_stub
):
    response = admin_client.post(
        reverse("admin:memory_memorynode_add"),
        {
            "owner": user.pk,
            "description": "Alice is allergic to peanuts",
            "kind": "fact",
            "topic": "health",
            "fact_key": "",
            "state": "volatile",
            "confidence_score": 2,
            "importance": 0.8,
            "origin_context": "",
            "links_out-TOTAL_FORMS": 0,
            "links_out-INITIAL_FORMS": 0,
            "critiques-TOTAL_FORMS": 0,
            "critiques-INITIAL_FORMS": 0,
        },
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    node = MemoryNode.objects.get(description="Alice is allergic to peanuts")
    assert node.owner == user and node.embedding is not None
    event = Event.objects.get(kind="edit")
    assert event.owner == user and event.payload["node_id"] == node.pk


def test_bulk_promote_and_forget_call_the_services(admin_client, user, many_memories):
    url = reverse("admin:memory_memorynode_changelist")
    mine = [n.pk for n in many_memories if n.owner_id == user.pk][:3]
    admin_client.post(url, {"action": "promote", "_selected_action": mine})
    assert set(MemoryNode.objects.filter(pk__in=mine).values_list("state", flat=True)) == {
        "promoted"
    }
    assert Event.objects.get(kind="promotion").payload["node_ids"] == mine

    admin_client.post(url, {"action": "forget", "_selected_action": mine[:2]})
    assert not MemoryNode.objects.filter(pk__in=mine[:2]).exists()
    assert not MemoryLink.objects.filter(source_id__in=mine[:2]).exists()
    assert Event.objects.filter(kind="edit", payload__action="forget").count() == 1


def test_similar_to_this_lists_the_nearest_memories_of_the_same_owner(
    admin_client, user, other_user, llm_stub
):
    bees = services.memory_node_create(owner=user, description="Alice keeps bees", source="admin")
    services.memory_node_create(
        owner=user, description="Alice keeps bees and honey", source="admin"
    )
    services.memory_node_create(
        owner=user, description="Quantum chromodynamics lecture", source="admin"
    )
    services.memory_node_create(owner=other_user, description="Alice keeps bees", source="admin")
    url = reverse("admin:memory_memorynode_changelist")

    response = admin_client.post(url, {"action": "similar_to_this", "_selected_action": [bees.pk]})
    assert response.status_code == 302 and response.url.endswith(f"?similar_to={bees.pk}")

    response = admin_client.get(response.url)
    shown = list(response.context["cl"].result_list)
    assert [n.owner_id for n in shown] == [user.pk, user.pk]
    assert shown[0].description == "Alice keeps bees and honey"
    assert shown[0].distance <= shown[1].distance


def test_a_triple_change_form_links_to_its_provenance(admin_client, user):
    triple = graph_services.triple_upsert(
        owner=user, subject="user", predicate="likes", object="tea"
    )
    response = admin_client.get(reverse("admin:memory_triple_change", args=[triple.pk]))
    assert response.status_code == 200
    assert Triple.objects.count() == 1


def test_a_node_page_shows_its_links_and_critiques_inline(admin_client, many_memories):
    node = many_memories[1]
    response = admin_client.get(reverse("admin:memory_memorynode_change", args=[node.pk]))
    body = response.content.decode()
    assert f"Debate on {node.pk}" in body
    assert "links to other memories" in body.lower()


def test_running_the_critic_now_queues_the_turns_that_formed_the_memories(
    admin_client, user, django_capture_on_commit_callbacks
):
    from apps.chat.models import Conversation, Message

    conversation = Conversation.objects.create(owner=user)
    reply = Message.objects.create(conversation=conversation, role="assistant", content="ok")
    node = services.memory_node_create(
        owner=user,
        description="Alice keeps bees",
        source_message=reply,
        embed=False,
        source="inferred",
    )
    with django_capture_on_commit_callbacks() as callbacks:
        response = admin_client.post(
            reverse("admin:memory_memorynode_changelist"),
            {"action": "criticise_now", "_selected_action": [node.pk]},
            follow=True,
        )
    assert any("1 turn(s)" in str(m) for m in response.context["messages"])
    assert callbacks  # the critic task is enqueued once the action commits


def test_a_memorys_page_explains_its_kinds_and_its_importance(admin_client, user):
    node = services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )

    html = admin_client.get(
        reverse("admin:memory_memorynode_change", args=[node.pk])
    ).content.decode()

    assert "Persona: who someone is" in html and "Concept: general knowledge" in html
    assert "0.5 is ordinary" in html and "1 (new) is 33%" in html
