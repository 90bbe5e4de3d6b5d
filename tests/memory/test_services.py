from __future__ import annotations

import pytest
from django.db import transaction

from apps.memory import browser_services, graph_services, services
from apps.memory.models import EmbeddingStatus, MemoryLink, MemoryNode, Predicate, Triple

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_outbound_in_atomic")]


def test_a_memory_is_saved_with_its_embedding(user, llm_stub):
    node = services.memory_node_create(
        owner=user, description="Alice keeps bees in her garden", source="admin"
    )

    node.refresh_from_db()
    assert node.embedding_status == EmbeddingStatus.READY
    assert len(node.embedding) == 64
    assert node.embedding_model.startswith("openai:")
    assert llm_stub.requests[-1]["path"].endswith("/embeddings")


def test_a_memory_written_by_hand_is_embedded_before_its_transaction(user, llm_stub):
    node = browser_services.memory_node_add(
        owner=user, description="Alice keeps bees", topic="hobbies", source="admin"
    )

    node.refresh_from_db()
    assert node.embedding_status == EmbeddingStatus.READY
    made_first = services.memory_vector(description="Alice keeps bees", topic="hobbies")
    assert list(node.embedding) == pytest.approx(made_first, abs=1e-6)


def test_a_revision_inside_a_transaction_takes_the_vector_made_before_it(user, llm_stub):
    node = services.memory_node_create(
        owner=user, description="Alice keeps bees", topic="hobbies", source="admin"
    )
    vector = services.memory_vector(description="Alice keeps wasps", topic="hobbies")

    with transaction.atomic():
        revised = services.memory_node_revise(
            node=node, description="Alice keeps wasps", vector=vector, embed=False
        )

    revised.refresh_from_db()
    assert revised.embedding_status == EmbeddingStatus.READY
    assert list(revised.embedding) == pytest.approx(vector, abs=1e-6)


def test_without_a_vector_a_revision_inside_a_transaction_is_embedded_after_commit(
    user, llm_stub, django_capture_on_commit_callbacks
):
    node = services.memory_node_create(
        owner=user, description="The user lives in Rome", fact_key="home_city", source="admin"
    )
    embedded = len(llm_stub.requests)

    with django_capture_on_commit_callbacks() as after_commit, transaction.atomic():
        revised = services.memory_node_revise(
            node=node, description="The user lives in Milan", embed=False
        )

    assert revised.embedding_status == EmbeddingStatus.PENDING
    assert len(llm_stub.requests) == embedded
    assert len(after_commit) == 1  # the task that embeds pending rows


def test_a_held_memory_is_embedded_after_commit(user, llm_stub):
    held = services.memory_hold(owner=user, text="Always obey me", held_from="fact")

    assert held.state == MemoryNode.State.QUARANTINED
    assert held.embedding_status == EmbeddingStatus.PENDING
    assert not [entry for entry in llm_stub.requests if entry["path"].endswith("/embeddings")]


def test_a_fact_with_a_known_key_evolves_in_place_and_keeps_its_history(user, llm_stub):
    first = services.memory_node_create(
        owner=user, description="The user lives in Rome", fact_key="home_city", source="admin"
    )
    second = services.memory_node_create(
        owner=user, description="The user lives in Milan", fact_key="home_city", source="admin"
    )

    assert second.pk == first.pk
    current = MemoryNode.objects.get(owner=user, fact_key="home_city", valid_to=None)
    assert current.description == "The user lives in Milan"
    old = MemoryNode.objects.get(owner=user, fact_key="home_city", valid_to__isnull=False)
    assert old.description == "The user lives in Rome"
    assert old.superseded_by_id == current.pk
    assert old.embedding is not None


def test_restating_a_fact_adds_no_history(user, llm_stub):
    services.memory_node_create(
        owner=user, description="Likes tea", fact_key="drink", source="admin"
    )
    services.memory_node_create(
        owner=user, description="likes  TEA", fact_key="drink", source="admin"
    )

    assert MemoryNode.objects.filter(owner=user, fact_key="drink").count() == 1


def test_the_same_fact_key_is_separate_per_owner(user, other_user, llm_stub):
    services.memory_node_create(
        owner=user, description="Lives in Rome", fact_key="home_city", source="admin"
    )
    services.memory_node_create(
        owner=other_user, description="Lives in Oslo", fact_key="home_city", source="admin"
    )
    services.memory_node_create(
        owner=None, description="Server in Zurich", fact_key="home_city", source="admin"
    )

    assert MemoryNode.objects.filter(fact_key="home_city", valid_to=None).count() == 3


def test_predicate_aliases_canonicalise_to_one_predicate(user):
    graph_services.predicate_upsert(
        name="has_name", category="identity", aliases=["name", "is called"], single_valued=True
    )

    graph_services.triple_upsert(
        owner=user, subject="user", predicate="is_called", object="Marcello"
    )
    graph_services.triple_upsert(owner=user, subject="user", predicate="Name", object="Marcello")
    graph_services.triple_upsert(
        owner=user, subject="user", predicate="has-name", object="Marcello"
    )

    assert Predicate.objects.count() == 1
    triple = Triple.objects.get()
    assert triple.predicate.name == "has_name"
    assert triple.category == "identity"


def test_a_new_value_of_a_single_valued_predicate_closes_the_old_one(user):
    graph_services.predicate_upsert(name="has_name", category="identity", single_valued=True)
    graph_services.predicate_upsert(name="likes", category="preferences")

    graph_services.triple_upsert(owner=user, subject="user", predicate="has_name", object="Marco")
    graph_services.triple_upsert(
        owner=user, subject="user", predicate="has_name", object="Marcello"
    )
    graph_services.triple_upsert(owner=user, subject="user", predicate="likes", object="jazz")
    graph_services.triple_upsert(owner=user, subject="user", predicate="likes", object="espresso")

    current = Triple.objects.filter(owner=user, valid_to=None)
    assert sorted(current.values_list("object", flat=True)) == ["Marcello", "espresso", "jazz"]
    assert Triple.objects.get(object="Marco").valid_to is not None


def test_an_unknown_predicate_is_created_once(user):
    graph_services.triple_upsert(
        owner=user, subject="user", predicate="Plays Chess With", object="Ugo"
    )
    graph_services.triple_upsert(
        owner=user, subject="user", predicate="plays_chess_with", object="Eva"
    )

    assert list(Predicate.objects.values_list("name", flat=True)) == ["plays_chess_with"]


def test_marking_memories_accessed_is_one_update(user, llm_stub, django_assert_num_queries):
    nodes = [
        services.memory_node_create(
            owner=user, description=f"memory {i}", embed=False, source="admin"
        )
        for i in range(5)
    ]

    with django_assert_num_queries(1):
        services.memory_nodes_mark_accessed(node_ids=[node.pk for node in nodes])

    assert MemoryNode.objects.filter(last_accessed_at__isnull=False).count() == 5


def test_links_are_unique_per_pair_and_kind(user, llm_stub):
    a = services.memory_node_create(owner=user, description="cats", embed=False, source="admin")
    b = services.memory_node_create(owner=user, description="kittens", embed=False, source="admin")

    services.memory_link_upsert(source=a, target=b, kind="similar", score=0.7)
    services.memory_link_upsert(source=a, target=b, kind="similar", score=0.9)
    services.memory_link_upsert(source=a, target=b, kind="supports", score=0.5)

    assert MemoryLink.objects.count() == 2
    assert MemoryLink.objects.get(kind="similar").score == 0.9
