"""The memory write success rate: of the turns that stated something about the user, those
that taught a memory."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.core.models import RuntimeConfig
from apps.core.selectors import forget_runtime_config
from apps.dashboard.selectors import memory_write_rates

pytestmark = pytest.mark.django_db

WRITTEN = {"reflection": {"created": [1], "stated": True, "taught": True, "at": "2026-11-23"}}
# Stated, and all of it already remembered: taught as well.
RESTATED = {"reflection": {"left": [1], "stated": True, "taught": True, "at": "2026-11-23"}}
# Stated, but nothing came of it (the model quoted nothing the user wrote).
MISSED = {"reflection": {"created": [], "stated": True, "taught": False, "at": "2026-11-23"}}
# A question: nothing to learn, so not a turn of the rate.
ASKED = {"reflection": {"created": [], "stated": False, "taught": False, "at": "2026-11-23"}}
FAILED = {"reflection": {"error": "no JSON", "failed": True, "attempts": 3, "stated": True}}


def _turns(owner, *turns):
    """turns: (minutes ago, trace[, status]); each a user message and the assistant's reply."""
    conversation = Conversation.objects.create(owner=owner)
    for minutes_ago, trace, *status in turns:
        asked = Message.objects.create(conversation=conversation, role="user", content="hi")
        reply = Message.objects.create(
            conversation=conversation,
            role="assistant",
            content="hello",
            reply_to=asked,
            trace=trace,
            status=status[0] if status else Message.Status.COMPLETE,
        )
        when = timezone.now() - timedelta(minutes=minutes_ago)
        Message.objects.filter(pk__in=[asked.pk, reply.pk]).update(created_at=when)


def test_the_rate_counts_stated_turns_that_taught_a_memory_over_the_hour_and_the_day(
    user, django_assert_num_queries
):
    _turns(
        user,
        (5, WRITTEN),
        (20, RESTATED),
        (30, WRITTEN),
        (40, FAILED),
        (45, ASKED),  # stated nothing: not counted
        (1, {}),  # still being reflected on: not counted yet
        (50, {}, Message.Status.FAILED),  # not a complete reply
        (180, {}),  # never reflected on: a lost write
        (240, MISSED),
        (300, WRITTEN),
        (60 * 30, WRITTEN),  # older than a day
    )

    with django_assert_num_queries(2):  # the runtime config, then one aggregate
        rates = memory_write_rates(owner_id=user.pk)

    assert (rates["hour"].written, rates["hour"].turns, rates["hour"].percent) == (3, 4, 75)
    assert (rates["day"].written, rates["day"].turns, rates["day"].percent) == (4, 7, 57)


def test_a_users_dashboard_counts_only_their_turns(client, user, other_user):
    _turns(user, (5, WRITTEN), (10, WRITTEN))
    _turns(other_user, (5, FAILED), (6, FAILED), (7, FAILED))
    client.force_login(user)

    body = client.get(reverse("dashboard:mine")).content.decode()

    assert '<strong id="writes-hour">100%</strong> of 2 turns that stated something' in body
    assert "(all users)" not in body


def test_the_admin_shows_every_users_rate_next_to_the_reflection_toggle(
    admin_client, user, other_user
):
    _turns(user, (5, WRITTEN))
    _turns(other_user, (5, FAILED))
    config = RuntimeConfig.objects.create()

    response = admin_client.get(reverse("admin:core_runtimeconfig_change", args=[config.pk]))

    body = response.content.decode()
    assert "Memory writes (all users)" in body
    assert '<strong id="writes-hour">50%</strong> of 2 turns that stated something' in body


def test_switched_off_reflection_shows_the_rate_as_off(client, user):
    RuntimeConfig.objects.create(reflection_enabled=False)
    forget_runtime_config()
    _turns(user, (5, {}))
    client.force_login(user)

    body = client.get(reverse("dashboard:mine")).content.decode()

    assert "off (reflection is switched off)" in body


def test_a_turn_nothing_could_be_learnt_from_is_no_lost_write(user):
    _turns(user, (30, WRITTEN), (40, {"memory": {"off": True}}))
    temporary = Conversation.objects.create(owner=user, temporary=True)
    asked = Message.objects.create(conversation=temporary, role="user", content="I live in Rome")
    reply = Message.objects.create(
        conversation=temporary, role="assistant", content="Ok", reply_to=asked, status="complete"
    )
    Message.objects.filter(pk=reply.pk).update(created_at=timezone.now() - timedelta(minutes=50))

    rates = memory_write_rates(owner_id=user.pk)

    assert (rates["hour"].written, rates["hour"].turns) == (1, 1)
