"""Temporary chats: started from the page, shown as such, deleted 24 hours after they began by
the beat task (issue #15, item 3)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from apps.chat import services, tasks
from apps.chat.models import Conversation

pytestmark = pytest.mark.django_db


def _aged(conversation: Conversation, hours: float) -> Conversation:
    Conversation.objects.filter(pk=conversation.pk).update(
        created_at=timezone.now() - timedelta(hours=hours)
    )
    conversation.refresh_from_db()
    return conversation


def test_the_temporary_chat_button_starts_a_temporary_conversation_shown_as_such(client, user):
    client.force_login(user)

    response = client.post(reverse("chat:new"), {"temporary": "1"})

    conversation = Conversation.objects.get(owner=user)
    assert conversation.temporary
    assert response.url == reverse("chat:conversation", args=[conversation.pk])
    page = client.get(response.url).content.decode()
    assert 'id="temporary-notice"' in page
    assert "Nothing here is remembered" in page
    assert "badge-temporary" in page
    assert "Temporary chat" in page


def test_a_new_conversation_is_kept_and_an_empty_temporary_one_is_not_reused_for_it(client, user):
    client.force_login(user)
    client.post(reverse("chat:new"), {"temporary": "1"})

    response = client.post(reverse("chat:new"))

    kept = Conversation.objects.get(owner=user, temporary=False)
    assert response.url == reverse("chat:conversation", args=[kept.pk])
    assert 'id="temporary-notice"' not in client.get(response.url).content.decode()
    assert Conversation.objects.filter(owner=user).count() == 2


def test_the_task_deletes_temporary_chats_older_than_24_hours_only(user, other_user):
    old = _aged(services.conversation_create(user=user, temporary=True), 24.5)
    services.message_send(conversation=old, content="forget me")
    young = _aged(services.conversation_create(user=user, temporary=True), 23)
    kept = _aged(services.conversation_create(user=other_user), 100)

    deleted = tasks.delete_expired_temporary()

    assert deleted == 1
    assert not Conversation.objects.filter(pk=old.pk).exists()
    assert set(Conversation.objects.values_list("pk", flat=True)) == {young.pk, kept.pk}
    assert young.expires_at == young.created_at + timedelta(hours=24)
    assert kept.expires_at is None


def test_the_deletion_runs_on_a_beat_schedule():
    schedule = PeriodicTask.objects.get(task="chat.delete_expired_temporary")

    assert schedule.enabled
    assert schedule.interval.every == 15 and schedule.interval.period == "minutes"
