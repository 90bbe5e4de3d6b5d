from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from apps.chat.models import Conversation
from apps.cognition import episodes, tasks
from apps.memory.models import Episode
from tests.cognition.conftest import wait_for

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = pytest.mark.usefixtures("no_outbound_in_atomic")

schedules = importlib.import_module("apps.core.migrations.0005_default_schedules")

EPISODE = {
    "json": {
        "summary": "Planned a trip to Lisbon.",
        "decisions": "Go in May.",
        "outcome": "Flights chosen.",
        "lesson": "Ask about budget first.",
    },
    "match": "episode of the",
}


def test_an_idle_conversation_becomes_one_episode_with_its_embedding(
    celery_worker, user, turn, llm_stub, config
):
    config(episode_idle_minutes=10)
    first = turn("Help me plan Lisbon", "Sure, when?")
    turn("In May", "Great, here are flights.")
    busy = Conversation.objects.create(owner=user)
    turn("Still talking", "Yes", conversation=busy)
    Conversation.objects.filter(pk=first.conversation_id).update(
        updated_at=timezone.now() - timedelta(minutes=11)
    )
    llm_stub.script(EPISODE)

    assert tasks.episodes_sweep.delay().get(timeout=45) == 1
    episode = wait_for(lambda: Episode.objects.filter(embedding_status="ready").first())

    assert episode.conversation_id == first.conversation_id and episode.owner == user
    assert (episode.decisions, episode.lesson) == ("Go in May.", "Ask about budget first.")
    assert episode.messages.count() == 4
    assert user.events.filter(kind="episode").count() == 1
    assert tasks.episodes_sweep.delay().get(timeout=45) == 0
    tasks.summarise_episode.delay(first.conversation_id).get(timeout=45)
    assert Episode.objects.count() == 1


@pytest.mark.django_db
def test_a_long_conversation_is_due_every_short_term_window(user, turn, config):
    config(short_term_window=4)
    reply = turn("one", "two")
    assert not episodes.due_after_turn(conversation_id=reply.conversation_id)
    turn("three", "four")
    assert episodes.due_after_turn(conversation_id=reply.conversation_id)


@pytest.mark.django_db
def test_default_schedules_exist_and_recreating_them_keeps_an_admins_edit(default_schedules):
    from django.apps import apps

    promote = PeriodicTask.objects.get(task="memory.promote_and_link")
    assert {t.task for t in PeriodicTask.objects.all()} >= {
        "memory.promote_and_link",
        "memory.decay",
        "cognition.episodes_sweep",
    }
    promote.enabled = False
    promote.save()

    schedules.create_schedules(apps, None)

    assert PeriodicTask.objects.filter(task="memory.promote_and_link").count() == 1
    assert not PeriodicTask.objects.get(task="memory.promote_and_link").enabled
