from __future__ import annotations

import re

import pytest
from django.conf import settings
from django_celery_beat.models import PeriodicTask

from apps.cognition import critic, tasks
from apps.memory import critique_services, graph_services
from apps.memory import services as memory_services
from apps.memory.models import Critique, MemoryLink, MemoryNode
from apps.memory.provenance import MARKERS
from tests.cognition.conftest import verdict
from tests.spotlight import marked


def critic_prompts(llm_stub) -> list[str]:
    return [
        message["content"]
        for request in llm_stub.requests
        if "sceptical critic" in str(request["body"])
        for message in request["body"]["messages"]
        if message["role"] == "user"
    ]


@pytest.fixture
def lives_in_rome(user):
    return memory_services.memory_node_create(
        owner=user,
        description="The user lives in Rome",
        state=MemoryNode.State.PROMOTED,
        confidence_score=5,
        source="admin",
    )


def test_the_critic_is_shown_a_promoted_memory_and_a_fact_that_could_contradict_the_node(
    celery_worker, user, turn, llm_stub, lives_in_rome
):
    graph_services.triple_upsert(owner=user, subject="user", predicate="lives_in", object="Rome")
    reply = turn("I moved to Paris", "Nice!")
    node = memory_services.memory_node_create(
        owner=user, description="The user lives in Paris", source_message=reply, source="inferred"
    )
    llm_stub.script(verdict("withstands"))

    tasks.criticise_unreviewed.delay().get(timeout=45)

    (prompt,) = critic_prompts(llm_stub)
    # An inferred memory and a fact are data: datamarked (apps.memory.provenance).
    marker = re.search(f"lives[{MARKERS}]in[{MARKERS}]Paris", prompt).group()[5]
    paris = marked("The user lives in Paris", marker)
    assert f"[{node.pk}] fact, topic -, key -: {paris}" in prompt
    assert (
        f"[{lives_in_rome.pk}] fact, topic -, key -: The user lives in Rome (long-term)" in prompt
    )
    assert f"fact: {marked('user lives_in Rome', marker)}" in prompt
    assert "user: I moved to Paris" in prompt


def test_a_contradicts_verdict_links_the_memories_and_lowers_confidence_by_one(
    celery_worker, user, turn, llm_stub, lives_in_rome
):
    node = memory_services.memory_node_create(
        owner=user, description="The user lives in Paris", source="admin"
    )
    llm_stub.script(
        verdict(
            "fails",
            debate="Against: the user lives in Rome, a long-term memory. For: little.",
            contradicts=[lives_in_rome.pk, 999999],
        )
    )

    tasks.criticise_unreviewed.delay().get(timeout=45)

    node.refresh_from_db()
    assert node.confidence_score == 0
    link = MemoryLink.objects.get(source=node)
    assert (link.target_id, link.kind) == (lives_in_rome.pk, MemoryLink.Kind.CONTRADICTS)
    assert 0 < link.score <= 1
    critique = Critique.objects.get(node=node)
    assert critique.contradicts == [lives_in_rome.pk] and critique.message is None
    assert critique.debate.startswith("Against: the user lives in Rome")


def test_a_supports_verdict_links_the_memories_and_raises_confidence_by_one(
    celery_worker, user, llm_stub, lives_in_rome
):
    node = memory_services.memory_node_create(
        owner=user, description="The user's home is Rome", source="admin"
    )
    llm_stub.script(verdict("withstands", supports=[lives_in_rome.pk]))

    tasks.criticise_unreviewed.delay().get(timeout=45)

    node.refresh_from_db()
    assert node.confidence_score == 2
    assert MemoryLink.objects.filter(
        source=node, target=lives_in_rome, kind=MemoryLink.Kind.SUPPORTS
    ).exists()


def test_the_sweep_reviews_at_most_its_bound_oldest_first_and_never_twice(
    celery_worker, user, turn, llm_stub
):
    nodes = [
        memory_services.memory_node_create(
            owner=user, description=f"The user owns {count} cats", source="admin"
        )
        for count in range(critic.SWEEP_MAX_NODES + 2)
    ]
    already = nodes[0]
    critique_services.critique_record(
        node_id=already.pk, message=turn("hi", "hello"), verdict="withstands", debate="ok"
    )
    llm_stub.script(*[verdict("withstands") for _ in range(2 * critic.SWEEP_MAX_NODES + 2)])

    assert tasks.criticise_unreviewed.delay().get(timeout=45) == critic.SWEEP_MAX_NODES

    reviewed = set(Critique.objects.filter(message=None).values_list("node_id", flat=True))
    assert reviewed == {node.pk for node in nodes[1 : critic.SWEEP_MAX_NODES + 1]}
    assert len(critic_prompts(llm_stub)) == critic.SWEEP_MAX_NODES

    assert tasks.criticise_unreviewed.delay().get(timeout=45) == 1
    assert tasks.criticise_unreviewed.delay().get(timeout=45) == 0

    assert len(critic_prompts(llm_stub)) == critic.SWEEP_MAX_NODES + 1
    assert Critique.objects.filter(node=already).count() == 1
    for node in nodes[1:]:
        assert Critique.objects.filter(node=node).count() == 1
        node.refresh_from_db()
        assert node.confidence_score == 2


def test_a_disabled_critic_sweeps_nothing(celery_worker, user, llm_stub, config):
    config(critic_enabled=False)
    memory_services.memory_node_create(owner=user, description="The user likes tea", source="admin")

    assert tasks.criticise_unreviewed.delay().get(timeout=45) == 0

    assert not critic_prompts(llm_stub)


@pytest.mark.django_db
def test_the_sweep_is_scheduled_every_ten_minutes_on_the_background_queue():
    from importlib import import_module

    from django.apps import apps

    import_module("apps.core.migrations.0010_critic_sweep_schedule").create_schedule(apps, None)

    sweep = PeriodicTask.objects.get(task="cognition.criticise_unreviewed")
    assert (sweep.interval.every, sweep.interval.period) == (10, "minutes")
    assert settings.CELERY_TASK_ROUTES["cognition.criticise_unreviewed"] == {
        "queue": settings.THALAMUS_BACKGROUND_QUEUE
    }
