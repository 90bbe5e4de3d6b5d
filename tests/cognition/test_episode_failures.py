"""A summary that keeps failing is retried a bounded number of times, then left alone."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from apps.chat.models import Conversation
from apps.cognition import episodes, tasks
from apps.core.models import Event
from apps.memory.models import Episode, EpisodeFailure
from tests.cognition.conftest import wait_for


def _idle(conversation_id: int) -> None:
    Conversation.objects.filter(pk=conversation_id).update(
        updated_at=timezone.now() - timedelta(minutes=11)
    )


def _episode_requests(llm_stub) -> int:
    return sum("episode of the" in str(r["body"]) for r in llm_stub.requests)


def test_a_failing_summary_is_retried_three_times_then_marked_and_skipped_by_the_sweep(
    celery_worker, user, turn, llm_stub, config, no_backoff
):
    config(episode_idle_minutes=10, short_term_window=4)
    first = turn("Help me plan Lisbon", "Sure, when?")
    last = turn("In May", "Great, here are flights.")
    _idle(first.conversation_id)
    # Every structured reply is an empty object: no summary can be read from it.
    llm_stub.set_defaults(json_junk="empty")

    assert tasks.episodes_sweep.delay().get(timeout=45) == 1
    failure = wait_for(lambda: EpisodeFailure.objects.first(), timeout=40)

    assert (failure.conversation_id, failure.attempts) == (first.conversation_id, 3)
    assert failure.through_message_id == last.pk
    # Each attempt asks once and once more to repair the reply.
    assert _episode_requests(llm_stub) == 6
    errors = Event.objects.filter(owner=user, kind="error", payload__step="episode")
    assert [e.payload["error"][:24] for e in errors] == ["gave up after 3 attempts"]

    assert tasks.episodes_sweep.delay().get(timeout=45) == 0
    assert not episodes.due_after_turn(conversation_id=first.conversation_id)
    assert _episode_requests(llm_stub) == 6
    assert not Episode.objects.exists()

    # The conversation moves on: the next try holds the failed stretch and the new one.
    llm_stub.set_defaults(json_junk=None)
    turn("And the hotel?", "Near the river.")
    _idle(first.conversation_id)
    assert tasks.episodes_sweep.delay().get(timeout=45) == 1
    episode = wait_for(lambda: Episode.objects.first())
    assert episode.messages.count() == 6
