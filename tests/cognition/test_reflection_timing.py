"""Reflection waits for a conversation to go quiet, or for enough waiting turns, and takes them
in one call; a sweep finds the replies a lost task never reached."""

from __future__ import annotations

import importlib
import time
import uuid
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.core.cache import cache
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from apps.accounts import services as account_services
from apps.chat import services as chat_services
from apps.chat.models import Conversation, Message
from apps.cognition import reflection_timing, tasks
from tests.cognition.conftest import EXTRACT, reflection, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _asked(llm_stub) -> list[dict]:
    return [r["body"] for r in llm_stub.requests if EXTRACT in str(r["body"])]


def _finish(reply: Message) -> Message:
    return chat_services.message_finish(message=reply, status="complete", content="I see.")


def _streaming(reply: Message) -> Message:
    """The reply as it is while its answer streams: not yet complete."""
    Message.objects.filter(pk=reply.pk).update(status=Message.Status.STREAMING)
    reply.status = Message.Status.STREAMING
    return reply


def _reflected(*replies: Message) -> bool:
    return all("reflection" in Message.objects.get(pk=reply.pk).trace for reply in replies)


def test_by_default_nothing_is_reflected_while_the_conversation_is_not_yet_quiet(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False)  # reflection_quiet_seconds: its shipped 20

    _finish(turn("I moved to Rome last week", ""))
    time.sleep(3)

    assert _asked(llm_stub) == []


def test_a_quiet_conversation_is_reflected_on_in_one_call_over_every_waiting_turn(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False, reflection_quiet_seconds=2)
    llm_stub.script(
        reflection(
            "I moved to Rome last week",
            message_2=["I love espresso"],
            message_3=["I have a dog named Rex"],
        )
    )
    started = time.monotonic()
    replies = [
        _finish(turn("I moved to Rome last week", "")),
        _finish(turn("I love espresso", "")),
        _finish(turn("I have a dog named Rex", "")),
    ]

    wait_for(lambda: _reflected(*replies), timeout=30)

    assert time.monotonic() - started >= 2
    (asked,) = _asked(llm_stub)
    said = str(asked["messages"])
    assert "Rome" in said and "espresso" in said and "Rex" in said


def test_a_user_who_never_pauses_has_their_turns_reflected_every_few_turns(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False, reflection_quiet_seconds=1)  # reflection_every_turns: 4
    llm_stub.script(
        reflection(
            "I moved to Rome",
            message_2=["I love espresso"],
            message_3=["I have a dog"],
            message_4=["I work as a nurse"],
        )
    )
    said = ["I moved to Rome", "I love espresso", "I have a dog", "I work as a nurse"]
    replies = []
    for text in [*said, "And one more thing"]:
        if replies:
            # The answer ends and the user writes again at once: never quiet.
            _finish(replies[-1])
        replies.append(_streaming(turn(text, "")))
        time.sleep(1.5)
        if len(replies) < 5:
            assert _asked(llm_stub) == []
    replies.pop()

    wait_for(lambda: _reflected(*replies), timeout=30)

    assert len(_asked(llm_stub)) == 1


def test_a_turn_with_memory_off_is_never_reflected_on_with_the_others(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False)
    llm_stub.script(reflection("I moved to Rome last week"))
    private = turn("My bank PIN is 4321", "Noted.")
    Message.objects.filter(pk=private.pk).update(trace={"memory": {"off": True}})
    reply = turn("I moved to Rome last week", "Welcome!")

    tasks.reflect_conversation.delay(reply.conversation_id).get(timeout=45)

    assert _reflected(reply) and not _reflected(private)
    (asked,) = _asked(llm_stub)
    assert "PIN" not in str(asked["messages"])


def test_reflecting_a_conversation_twice_asks_the_model_once(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False)
    llm_stub.script(reflection("I moved to Rome last week"))
    reply = turn("I moved to Rome last week", "Welcome!")
    Message.objects.filter(pk=reply.pk).update(status=Message.Status.COMPLETE)

    first = tasks.reflect_conversation.delay(reply.conversation_id)
    second = tasks.reflect_conversation.delay(reply.conversation_id)
    first.get(timeout=45), second.get(timeout=45)

    assert _reflected(reply)
    assert len(_asked(llm_stub)) == 1


def test_a_reflection_of_a_conversation_already_under_way_comes_back_after_it(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False)
    llm_stub.script(reflection("I moved to Rome last week"))
    reply = turn("I moved to Rome last week", "Welcome!")
    under_way = f"cognition:reflecting:{reply.conversation_id}"
    cache.add(under_way, 1, 60)

    tasks.reflect_conversation.delay(reply.conversation_id).get(timeout=45)
    assert _asked(llm_stub) == []
    cache.delete(under_way)

    wait_for(lambda: _reflected(reply), timeout=30)
    assert len(_asked(llm_stub)) == 1


def test_a_reflection_redelivered_after_its_worker_died_takes_its_conversation_again(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False)
    llm_stub.script(reflection("I moved to Rome last week"))
    reply = turn("I moved to Rome last week", "Welcome!")
    # The dead worker's task held the conversation; the broker hands the same task out again.
    task_id = uuid.uuid4().hex
    cache.add(f"cognition:reflecting:{reply.conversation_id}", task_id, 60)

    tasks.reflect_conversation.apply_async((reply.conversation_id,), task_id=task_id).get(30)

    assert _reflected(reply) and len(_asked(llm_stub)) == 1


def test_a_reply_queued_before_the_upgrade_is_reflected_alone(
    celery_worker, user, turn, llm_stub, config
):
    config(critic_enabled=False)
    llm_stub.script(reflection("I moved to Rome last week"))
    earlier = turn("I love espresso", "Nice.")
    reply = turn("I moved to Rome last week", "Welcome!")
    Message.objects.filter(pk__in=[earlier.pk, reply.pk]).update(status=Message.Status.COMPLETE)

    tasks.reflect.delay(reply.pk).get(timeout=45)

    assert _reflected(reply) and not _reflected(earlier)


def _quiet_since(conversation: Conversation, minutes: int) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now() - timedelta(minutes=minutes)
    )


def _complete_turn(owner, text: str, *, temporary=False, trace=None) -> Message:
    conversation = Conversation.objects.create(owner=owner, temporary=temporary)
    asked = Message.objects.create(conversation=conversation, role="user", content=text)
    return Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content="I see.",
        reply_to=asked,
        status=Message.Status.COMPLETE,
        trace=trace or {},
    )


def test_the_sweep_finds_replies_no_reflection_reached_in_conversations_that_teach_memory(
    celery_worker, user, other_user, llm_stub, config
):
    config(critic_enabled=False)
    lost = _complete_turn(user, "I moved to Rome last week")
    reflected = _complete_turn(user, "I love tea", trace={"reflection": {"at": "then"}})
    temporary = _complete_turn(user, "I love cats", temporary=True)
    memory_off_then = _complete_turn(user, "I love dogs", trace={"memory": {"off": True}})
    memory_off_now = _complete_turn(other_user, "I love owls")
    account_services.user_settings_update(user=other_user, memory_enabled=False)
    still_chatting = _complete_turn(user, "I love rain")
    for reply in (lost, reflected, temporary, memory_off_then, memory_off_now):
        _quiet_since(reply.conversation, minutes=15)
    _quiet_since(still_chatting.conversation, minutes=2)
    llm_stub.script(reflection("I moved to Rome last week"))

    assert reflection_timing.conversations_never_reflected(limit=10) == [lost.conversation_id]
    assert tasks.reflect_unreflected.delay().get(timeout=45) == 1

    wait_for(lambda: _reflected(lost), timeout=30)
    assert not _reflected(temporary) and not _reflected(memory_off_now)
    assert len(_asked(llm_stub)) == 1


def test_the_sweep_runs_every_five_minutes_from_its_migration(db):
    migration = importlib.import_module("apps.core.migrations.0016_reflection_schedule")
    migration.create_schedule(django_apps, None)

    sweep = PeriodicTask.objects.get(task="cognition.reflect_unreflected")
    assert (sweep.interval.every, sweep.interval.period) == (5, "minutes") and sweep.enabled


def test_the_most_replies_one_call_takes_leave_room_for_the_longest_extraction_reply():
    # Each message may get two quotes of up to 120 characters; the call asks for room for all
    # of them (a reply cut inside a quote is lost whole), and the default cap must give it.
    from apps.cognition.schemas import QUOTE_MAX_CHARS, stated_quotes_max_tokens
    from apps.core.models import RuntimeConfig

    default_cap = RuntimeConfig._meta.get_field("background_max_tokens").default
    most = stated_quotes_max_tokens(reflection_timing.MAX_REPLIES_PER_CALL, QUOTE_MAX_CHARS)
    assert most <= default_cap
    assert stated_quotes_max_tokens(reflection_timing.MAX_REPLIES_PER_CALL + 1) > default_cap
