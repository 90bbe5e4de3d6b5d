from __future__ import annotations

import json
import time

import pytest
from pydantic import ValidationError

from apps.accounts.services import user_settings_update
from apps.chat.models import Conversation
from apps.cognition.context import mark_memories_used, memory_context_for_turn
from apps.memory import episode_services, graph_services, services
from apps.memory.models import MemoryNode, RetrievalPlan, Triple
from apps.memory.selectors import retrieval_plan_steps

# Transactional: the recall searches on pool threads with their own connections, as in
# production, and they see only what was committed.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user)


@pytest.fixture
def remembered(user, other_user, llm_stub):
    graph_services.predicate_upsert(name="has_name", category="identity", aliases=["is_called"])
    graph_services.triple_upsert(
        owner=user, subject="user", predicate="is_called", object="Marcello"
    )
    graph_services.triple_upsert(
        owner=other_user, subject="user", predicate="has_name", object="Eve"
    )
    return {
        "mine": services.memory_node_create(
            owner=user,
            description="Marcello's dog Argo is afraid of thunder",
            importance=0.8,
            source="admin",
        ),
        "theirs": services.memory_node_create(
            owner=other_user, description="Eve's dog Rex is afraid of thunder", source="admin"
        ),
        "global": services.memory_node_create(
            owner=None,
            description="Dogs afraid of thunder calm down in a quiet room",
            source="admin",
        ),
    }


def test_the_turn_gets_its_users_memories_and_graph_and_a_trace(
    user, conversation, remembered, llm_stub
):
    context = memory_context_for_turn(
        user=user, conversation=conversation, text="My dog is afraid of thunder, what can I do?"
    )

    assert "Name: Marcello" in context.prompt_block
    assert "- Marcello's dog Argo is afraid of thunder" in context.prompt_block
    assert "quiet room" in context.prompt_block
    assert "Eve" not in context.prompt_block and "Rex" not in context.prompt_block
    trace = json.loads(json.dumps(context.trace))
    used = {hit["id"] for hit in trace["memories"]}
    assert used == {remembered["mine"].pk, remembered["global"].pk}
    assert set(trace["memories"][0]["components"]) == {
        "vector", "text", "recency", "importance", "confidence"
    }  # fmt: skip
    assert trace["route"] in {"familiarity", "recollection"} and trace["reason"]
    assert trace["plan"]["source"] == "default"
    # The trace keeps ids and scores, never the texts.
    assert [triple["id"] for triple in trace["triples"]] == [
        Triple.objects.get(object="Marcello").pk
    ]
    assert "Marcello" not in json.dumps(trace) and "Argo" not in json.dumps(trace)
    assert {"plan_and_graph", "embed", "memories", "total"} <= set(trace["timings_ms"])
    assert trace["vector_search"] is True
    embeds = [r for r in llm_stub.requests if r["path"].endswith("/embeddings")]
    assert len(embeds) == 4  # three memories saved, one query embedded for the turn


def test_retrieved_memories_are_marked_accessed_by_the_worker(
    celery_worker, user, other_user, llm_stub
):
    conversation = Conversation.objects.create(owner=user)
    mine = services.memory_node_create(owner=user, description="Argo fears thunder", source="admin")
    services.memory_node_create(owner=other_user, description="Rex fears thunder", source="admin")

    context = memory_context_for_turn(user=user, conversation=conversation, text="thunder")
    assert MemoryNode.objects.filter(last_accessed_at__isnull=False).count() == 0
    mark_memories_used(context.trace)

    deadline = time.monotonic() + 45
    accessed = MemoryNode.objects.filter(last_accessed_at__isnull=False)
    while not accessed.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(accessed.values_list("pk", flat=True)) == [mine.pk]


def test_an_embedding_failure_falls_back_to_full_text(user, conversation, remembered, llm_stub):
    llm_stub.script({"endpoint": "embeddings", "fault": "http_500"})

    context = memory_context_for_turn(user=user, conversation=conversation, text="thunder dog")

    assert context.trace["vector_search"] is False
    assert "embedding_error" in context.trace
    assert remembered["mine"].pk in {hit["id"] for hit in context.trace["memories"]}
    assert all(hit["components"]["vector"] == 0 for hit in context.trace["memories"])


def test_an_unreachable_llm_never_breaks_the_turn(user, conversation, remembered, settings):
    settings.THALAMUS_LLM_BASE_URL = "http://127.0.0.1:9/v1"

    context = memory_context_for_turn(user=user, conversation=conversation, text="thunder")

    assert context.trace["vector_search"] is False
    assert "Argo" in context.prompt_block


def test_nothing_to_remember_gives_an_empty_block(user, conversation, llm_stub):
    context = memory_context_for_turn(user=user, conversation=conversation, text="hello")

    assert context.prompt_block == ""
    assert context.trace["route"] == "recollection"
    assert context.trace["memories"] == []


def test_questions_about_the_past_take_the_recollection_route(user, conversation, llm_stub):
    episode_services.episode_create(
        owner=user,
        conversation=conversation,
        summary="Planned a trip to Lisbon in May",
        lesson="Book flights early",
    )

    context = memory_context_for_turn(
        user=user, conversation=conversation, text="Do you remember the trip we planned?"
    )

    assert context.trace["route"] == "recollection"
    assert "remember" in context.trace["reason"]
    assert "Planned a trip to Lisbon in May" in context.prompt_block
    assert "Book flights early" in context.prompt_block
    assert "episodes" in context.trace["timings_ms"]


def test_familiar_turns_skip_episodic_search(user, conversation, llm_stub):
    services.memory_node_create(
        owner=user,
        description="favourite colour is green",
        importance=1.0,
        confidence_score=9,
        source="admin",
    )

    context = memory_context_for_turn(
        user=user, conversation=conversation, text="favourite colour is green"
    )

    assert context.trace["route"] == "familiarity"
    assert "episodes" not in context.trace["timings_ms"]


def test_a_stored_plan_adds_its_steps_to_the_users_message(user, conversation, llm_stub):
    services.retrieval_plan_save(
        conversation=conversation,
        steps=[{"topic": "garden", "types": ["preference"], "query": "roses", "limit": 3}],
    )
    services.memory_node_create(
        owner=user, description="Grows roses", kind="preference", source="admin"
    )

    context = memory_context_for_turn(user=user, conversation=conversation, text="hi there")

    assert context.trace["plan"]["source"] == "plan"
    assert [step["query"] for step in context.trace["plan"]["steps"]] == ["hi there", "roses"]
    assert "Grows roses" in context.prompt_block


@pytest.mark.parametrize(
    "stored", [[{"limit": "many", "query": "x"}], {"not": "a list"}, "garbage", 42]
)
def test_a_corrupt_plan_falls_back_to_the_users_message(conversation, stored):
    RetrievalPlan.objects.create(conversation=conversation, steps=stored)

    steps, source = retrieval_plan_steps(conversation=conversation, text="hello", limit=8)

    assert source == "corrupt-plan"
    assert [(step.query, step.limit) for step in steps] == [("hello", 8)]


def test_a_missing_plan_falls_back_to_the_users_message(conversation):
    steps, source = retrieval_plan_steps(conversation=conversation, text="hello", limit=8)

    assert source == "default"
    assert [step.query for step in steps] == ["hello"]


def test_an_invalid_plan_is_refused_when_saved(conversation):
    with pytest.raises(ValidationError):
        services.retrieval_plan_save(conversation=conversation, steps=[{"types": ["gossip"]}])


def test_the_memory_block_is_written_in_the_users_knowledge_language(
    user, conversation, llm_stub, config
):
    config(renderer_language="en")
    graph_services.predicate_upsert(
        name="lives_in", category="places", labels={"en": "lives in", "it": "vive a"}
    )
    graph_services.triple_upsert(owner=user, subject="user", predicate="lives_in", object="Roma")
    user_settings_update(user=user, knowledge_language="it")

    context = memory_context_for_turn(user=user, conversation=conversation, text="Roma")

    assert context.language == "it"
    assert "vive a" in context.prompt_block and "lives in" not in context.prompt_block
