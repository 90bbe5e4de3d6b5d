"""No turn dropped silently (#27 item 4): every way a reflection, a critique or an episode
summary can fail ends in an outcome recorded on its message or stretch, once, and no sweep
asks for it again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.cognition import critic, episodes, reflection, reflection_timing, tasks
from apps.core.models import Event
from apps.memory.models import Episode, EpisodeFailure, MemoryNode
from tests.cognition.conftest import EXTRACT, wait_for
from tests.cognition.conftest import reflection as extraction

CRITIC = "sceptical critic"
EPISODE = "episode of the"


def _boom(*args, **kwargs):
    raise RuntimeError("a fault of ours")


# How each fault is set up (stub defaults, runtime settings, scripted reply or a function of
# ours that raises) for a request matching `match`, and the words its recorded error holds.
def _faults(match: str, role: str, broken: tuple[object, str]) -> dict:
    return {
        "401": ({}, {}, {"fault": "http_401", "match": match}, None, "HTTP 401"),
        "404 after the fallback chain": (
            {"missing_models": ["gone", "gone-too"]},
            {f"{role}_model": "gone", "model_fallbacks": {role: ["gone-too"]}},
            None,
            None,
            "HTTP 404",
        ),
        "422": ({}, {}, {"fault": "http_422", "match": match}, None, "HTTP 422"),
        # The server's window is smaller than the one configured: it refuses with HTTP 400
        # and its own counts, and the gateway, fitting the prompt to them, finds no room.
        "400 context too long": (
            {"context": 20, "overflow": "reject"},
            {"context_tokens": 8192},
            None,
            None,
            "tokens",
        ),
        "garbage JSON": ({"fault": "garbage"}, {}, None, None, "JSON"),
        "a fault of ours": ({}, {}, None, broken, "unexpected error: RuntimeError"),
    }


REFLECTION_FAULTS = _faults(EXTRACT, "reflection", (reflection, "grounded_statements"))
CRITIC_FAULTS = _faults(CRITIC, "critic", (critic, "_facts_about"))
EPISODE_FAULTS = _faults(EPISODE, "episode", (episodes.episode_services, "episode_create"))


def _arrange(fault, llm_stub, config, monkeypatch) -> str:
    defaults, settings, scripted, broken, words = fault
    if defaults:
        llm_stub.set_defaults(**defaults)
    if settings:
        config(**settings)
    if scripted:
        llm_stub.script(scripted)
    if broken:
        monkeypatch.setattr(*broken, _boom)
    return words


def _quiet(conversation_id: int, minutes: int) -> None:
    Conversation.objects.filter(pk=conversation_id).update(
        updated_at=timezone.now() - timedelta(minutes=minutes)
    )


@pytest.mark.parametrize("fault", list(REFLECTION_FAULTS))
def test_a_reflection_that_cannot_succeed_is_marked_failed_with_why_and_not_swept_again(
    fault, celery_worker, user, turn, llm_stub, config, monkeypatch, no_backoff
):
    config(critic_enabled=False)
    reply = turn("I collect old stamps", "Nice.")
    _quiet(reply.conversation_id, minutes=11)
    assert reflection_timing.conversations_never_reflected(limit=10) == [reply.conversation_id]
    words = _arrange(REFLECTION_FAULTS[fault], llm_stub, config, monkeypatch)

    tasks.reflect_unreflected.delay().get(timeout=45)
    outcome = wait_for(lambda: Message.objects.get(pk=reply.pk).trace.get("reflection"), 40)

    assert outcome["failed"] is True and words in outcome["error"], outcome
    assert outcome["stated"] is True
    [error] = Event.objects.filter(owner=user, kind="error", payload__step="reflection")
    assert error.payload["message_id"] == reply.pk
    assert not MemoryNode.objects.exists()
    _quiet(reply.conversation_id, minutes=11)
    assert reflection_timing.conversations_never_reflected(limit=10) == []


@pytest.mark.parametrize("fault", list(CRITIC_FAULTS))
def test_a_critique_that_cannot_succeed_is_recorded_on_the_reply_and_not_swept_again(
    fault, celery_worker, user, turn, llm_stub, config, monkeypatch
):
    config(critic_enabled=False)
    reply = turn("I run marathons", "Impressive.")
    llm_stub.script(extraction("I run marathons"))
    reflection.reflect_on_message(message_id=reply.pk)
    node = MemoryNode.objects.get(owner=user)
    config(critic_enabled=True)
    words = _arrange(CRITIC_FAULTS[fault], llm_stub, config, monkeypatch)

    tasks.criticise.delay(reply.pk).get(timeout=45)

    outcome = Message.objects.get(pk=reply.pk).trace["critic"]
    assert outcome["judged"] == []
    [failed] = outcome["failed"]
    assert failed["node"] == node.pk and words in failed["error"], outcome
    [error] = Event.objects.filter(owner=user, kind="error", payload__step="critique")
    assert (error.payload["node_id"], error.payload["message_id"]) == (node.pk, reply.pk)
    # The sweep does not take the node again, and takes the others.
    other = MemoryNode.objects.create(owner=user, description="The user likes tea")
    assert critic.unreviewed_nodes(limit=10) == [other]


def test_a_critique_records_its_verdicts_on_the_reply(celery_worker, user, turn, llm_stub, config):
    config(critic_enabled=False)
    reply = turn("I run marathons", "Impressive.")
    llm_stub.script(extraction("I run marathons"))
    reflection.reflect_on_message(message_id=reply.pk)
    node = MemoryNode.objects.get(owner=user)
    config(critic_enabled=True)
    llm_stub.script({"json": {"debate": "For: said so.", "verdict": "withstands"}, "match": CRITIC})

    tasks.criticise.delay(reply.pk).get(timeout=45)

    outcome = Message.objects.get(pk=reply.pk).trace["critic"]
    assert outcome["judged"] == [{"node": node.pk, "verdict": "withstands", "delta": 1}]
    assert outcome["failed"] == []


@pytest.mark.parametrize("fault", list(EPISODE_FAULTS))
def test_an_episode_that_cannot_succeed_is_marked_failed_once_and_not_swept_again(
    fault, celery_worker, user, turn, llm_stub, config, monkeypatch, no_backoff
):
    config(episode_idle_minutes=10)
    turn("Help me plan Lisbon", "Sure, when?")
    last = turn("In May", "Great, here are flights.")
    _quiet(last.conversation_id, minutes=11)
    words = _arrange(EPISODE_FAULTS[fault], llm_stub, config, monkeypatch)

    assert tasks.episodes_sweep.delay().get(timeout=45) == 1
    failure = wait_for(lambda: EpisodeFailure.objects.first(), timeout=40)

    assert failure.through_message_id == last.pk and words in failure.error, failure.error
    [error] = Event.objects.filter(owner=user, kind="error", payload__step="episode")
    assert words in error.payload["error"]
    assert tasks.episodes_sweep.delay().get(timeout=45) == 0
    assert not Episode.objects.exists()


def _long_import(user, *, messages: int, words: int) -> Conversation:
    """An imported chat: one stretch of long messages, quiet for a year."""
    conversation = Conversation.objects.create(owner=user)
    asked = None
    for index in range(messages):
        role = Message.Role.USER if index % 2 == 0 else Message.Role.ASSISTANT
        asked = Message.objects.create(
            conversation=conversation,
            role=role,
            content=f"message {index}: " + "words about the trip " * (words // 4),
            reply_to=asked if role == Message.Role.ASSISTANT else None,
        )
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now() - timedelta(days=365)
    )
    return conversation


def test_a_stretch_too_long_for_the_window_is_summarised_in_parts(
    celery_worker, user, llm_stub, config
):
    # A 1,024-token server that refuses a longer prompt; 40 messages of 80 words do not fit
    # in one prompt even with every message cut to its shortest.
    config(episode_idle_minutes=10, short_term_window=4, context_tokens=1024)
    llm_stub.set_defaults(context=1024, overflow="reject")
    conversation = _long_import(user, messages=40, words=80)

    assert tasks.episodes_sweep.delay().get(timeout=45) == 1
    covered = Message.objects.filter(conversation=conversation, episodes__isnull=False)
    wait_for(lambda: covered.count() >= 37, timeout=60)
    # The last few (fewer than the short-term window) wait for the next sweep.
    if covered.count() < 40:
        assert tasks.episodes_sweep.delay().get(timeout=45) == 1
        wait_for(lambda: covered.count() == 40, timeout=30)

    parts = list(Episode.objects.order_by("started_at"))
    assert len(parts) >= 3
    # Each part ends with an answer, not with the question it answers.
    assert {part.messages.order_by("id").last().role for part in parts} == {"assistant"}
    held = [list(part.messages.order_by("id").values_list("id", flat=True)) for part in parts]
    assert sorted(sum(held, [])) == list(
        conversation.messages.order_by("id").values_list("id", flat=True)
    )
    assert not EpisodeFailure.objects.exists()
    asked = [r["body"] for r in llm_stub.requests if EPISODE in str(r["body"])]
    assert len(asked) == len(parts)
    assert tasks.episodes_sweep.delay().get(timeout=45) == 0


def test_a_stretch_whose_smallest_part_does_not_fit_is_marked_failed_once(
    celery_worker, user, llm_stub, config
):
    # A server whose window (30 tokens) holds no two messages: it refuses the first request
    # with its counts, and every smaller part is then measured against them, not sent.
    config(episode_idle_minutes=10, context_tokens=8192)
    llm_stub.set_defaults(context=30, overflow="reject")
    conversation = _long_import(user, messages=6, words=80)

    assert tasks.episodes_sweep.delay().get(timeout=45) == 1
    failure = wait_for(lambda: EpisodeFailure.objects.first(), timeout=30)

    assert failure.conversation_id == conversation.pk and "tokens" in failure.error
    assert len([r for r in llm_stub.requests if EPISODE in str(r["body"])]) == 1
    assert tasks.episodes_sweep.delay().get(timeout=45) == 0
    assert not Episode.objects.exists()
