"""Reflection honours the user's settings: memory off or a temporary chat learns nothing, and
only the categories the user allows are stored (issue #15, item 3)."""

from __future__ import annotations

import pytest

from apps.accounts import services as account_services
from apps.chat import services as chat_services
from apps.chat.models import Conversation, Message
from apps.cognition.reflection import reflect_on_message
from apps.memory.models import Category, MemoryNode, Triple
from tests.cognition.conftest import EXTRACT, reflection

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_outbound_in_atomic")]


def _reflection_requests(llm_stub) -> list[dict]:
    return [r for r in llm_stub.requests if EXTRACT in str(r["body"])]


def test_a_disallowed_category_is_dropped_and_counted_in_the_outcome(user, turn, llm_stub, config):
    config(critic_enabled=False)
    allowed = ["identity", "preferences", "work"]
    account_services.user_settings_update(user=user, learn_categories=allowed)
    reply = turn("I love espresso and I have asthma", "Noted.")
    llm_stub.script(reflection("I love espresso and I have asthma"))

    outcome = reflect_on_message(message_id=reply.pk)

    descriptions = list(MemoryNode.objects.filter(owner=user).values_list("description", flat=True))
    assert descriptions == ["The user loves espresso"]
    assert list(Triple.objects.filter(owner=user).values_list("object", flat=True)) == ["espresso"]
    assert outcome["withheld"] == {"memories": 1, "triples": 0, "categories": ["health"]}
    reply.refresh_from_db()
    assert reply.trace["reflection"]["withheld"]["categories"] == ["health"]


def test_a_triple_is_judged_by_its_predicates_category(user, turn, llm_stub, config):
    config(critic_enabled=False)
    account_services.user_settings_update(user=user, learn_categories=["health"])
    reply = turn("My daughter Sofia is allergic to peanuts", "Noted.")
    llm_stub.script(reflection("My daughter Sofia is allergic to peanuts"))

    outcome = reflect_on_message(message_id=reply.pk)

    node = MemoryNode.objects.get(owner=user)
    assert node.description == "The user's daughter Sofia is allergic to peanuts"
    assert not Triple.objects.filter(owner=user).exists()
    assert outcome["withheld"] == {"memories": 0, "triples": 1, "categories": ["relationships"]}


def test_by_default_every_category_is_learnt(user, turn, llm_stub, config):
    config(critic_enabled=False)
    reply = turn("I have asthma", "Noted.")
    llm_stub.script(reflection("I have asthma"))

    outcome = reflect_on_message(message_id=reply.pk)

    assert MemoryNode.objects.filter(owner=user, description="The user has asthma").exists()
    assert "withheld" not in outcome


def test_with_memory_off_reflection_learns_nothing_and_asks_nothing(user, turn, llm_stub):
    account_services.user_settings_update(user=user, memory_enabled=False)
    reply = turn("I moved to Rome", "Welcome!")

    assert reflect_on_message(message_id=reply.pk) is None

    assert _reflection_requests(llm_stub) == []
    assert not MemoryNode.objects.filter(owner=user).exists()


def test_a_temporary_chat_is_not_reflected_on(user, turn, llm_stub):
    conversation = Conversation.objects.create(owner=user, temporary=True)
    reply = turn("I moved to Rome", "Welcome!", conversation=conversation)

    assert reflect_on_message(message_id=reply.pk) is None

    assert _reflection_requests(llm_stub) == []


@pytest.mark.parametrize("setting", ["memory_off", "temporary"])
def test_a_finished_reply_queues_no_reflection_when_nothing_may_be_learnt(
    user, llm_stub, setting, django_capture_on_commit_callbacks
):
    if setting == "memory_off":
        account_services.user_settings_update(user=user, memory_enabled=False)
    conversation = Conversation.objects.create(owner=user, temporary=setting == "temporary")
    reply = chat_services.message_send(conversation=conversation, content="I moved to Rome").reply

    chat_services.message_finish(message=reply, status=Message.Status.COMPLETE, content="Hi!")
    reply.refresh_from_db()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        chat_services.message_queue_background(message=reply)

    assert _task_names(callbacks) == {"apps.chat.tasks.title_conversation"}


def test_a_finished_reply_queues_reflection_by_default(
    user, llm_stub, django_capture_on_commit_callbacks
):
    conversation = Conversation.objects.create(owner=user)
    reply = chat_services.message_send(conversation=conversation, content="I moved to Rome").reply
    chat_services.message_finish(message=reply, status=Message.Status.COMPLETE, content="Hi!")
    reply.refresh_from_db()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        chat_services.message_queue_background(message=reply)

    assert "cognition.reflect_when_quiet" in _task_names(callbacks)


def _task_names(callbacks) -> set[str]:
    """The names of the Celery tasks the on-commit callbacks would send."""
    return {
        cell.cell_contents
        for callback in callbacks
        for cell in callback.__closure__ or ()
        if isinstance(cell.cell_contents, str)
    }


def test_tomorrow_is_the_users_tomorrow_in_their_time_zone(user, turn, llm_stub, config):
    from datetime import timedelta
    from zoneinfo import ZoneInfo

    from django.utils import timezone

    config(critic_enabled=False)
    # UTC+14 and UTC-11 are never on the same day.
    for zone in ("Pacific/Kiritimati", "Pacific/Pago_Pago"):
        account_services.user_settings_update(user=user, time_zone=zone)
        MemoryNode.objects.filter(owner=user).delete()
        reply = turn("I have an exam tomorrow", "Good luck!")
        llm_stub.script(reflection("I have an exam tomorrow"))

        reflect_on_message(message_id=reply.pk)

        node = MemoryNode.objects.get(owner=user)
        tomorrow = timezone.now().astimezone(ZoneInfo(zone)).date() + timedelta(days=1)
        assert timezone.localtime(node.valid_until).date() == tomorrow


@pytest.mark.parametrize("setting", ["memory_off", "temporary"])
def test_an_idle_chat_that_may_teach_nothing_is_not_summarised_into_an_episode(
    user, turn, llm_stub, config, setting
):
    from datetime import timedelta

    from django.utils import timezone

    from apps.cognition import episodes
    from apps.memory.models import Episode

    config(episode_idle_minutes=10)
    if setting == "memory_off":
        account_services.user_settings_update(user=user, memory_enabled=False)
    conversation = Conversation.objects.create(owner=user, temporary=setting == "temporary")
    turn("Help me plan Lisbon", "Sure, when?", conversation=conversation)
    turn("In May", "Great, here are flights.", conversation=conversation)
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now() - timedelta(minutes=11)
    )

    assert episodes.idle_conversations(idle_minutes=10, limit=10) == []
    assert episodes.episode_summarise(conversation_id=conversation.pk) is None
    assert not Episode.objects.exists()
    assert [r for r in llm_stub.requests if "episode of the" in str(r["body"])] == []


def test_an_idle_kept_chat_is_still_due_for_its_episode(user, turn, config):
    from datetime import timedelta

    from django.utils import timezone

    from apps.cognition import episodes

    account_services.user_settings_update(user=user, about_me="I am a nurse.")
    conversation = Conversation.objects.create(owner=user)
    turn("Help me plan Lisbon", "Sure, when?", conversation=conversation)
    turn("In May", "Great, here are flights.", conversation=conversation)
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now() - timedelta(minutes=11)
    )

    assert episodes.idle_conversations(idle_minutes=10, limit=10) == [conversation.pk]


def test_a_fact_of_no_category_is_withheld_from_a_user_who_narrowed_the_categories(
    user, turn, llm_stub, config
):
    config(critic_enabled=False)
    every_but_health = [value for value in Category.values if value != "health"]
    account_services.user_settings_update(user=user, learn_categories=every_but_health)
    reply = turn("I collect old stamps", "Nice.")
    llm_stub.script(reflection("I collect old stamps"))

    outcome = reflect_on_message(message_id=reply.pk)

    assert not MemoryNode.objects.filter(owner=user).exists()
    assert outcome["withheld"] == {"memories": 1, "triples": 0, "categories": ["unclassified"]}


def test_a_fact_of_no_category_is_learnt_by_default(user, turn, llm_stub, config):
    config(critic_enabled=False)
    reply = turn("I collect old stamps", "Nice.")
    llm_stub.script(reflection("I collect old stamps"))

    reflect_on_message(message_id=reply.pk)

    assert MemoryNode.objects.filter(owner=user, description="The user collects old stamps")
