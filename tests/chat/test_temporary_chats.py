"""Temporary chats: started from the page, shown as such, deleted 24 hours after they began by
the beat task (issue #15, item 3)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from apps.chat import conversation_services, services, tasks
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
    old = _aged(conversation_services.conversation_create(user=user, temporary=True), 24.5)
    services.message_send(conversation=old, content="forget me")
    young = _aged(conversation_services.conversation_create(user=user, temporary=True), 23)
    kept = _aged(conversation_services.conversation_create(user=other_user), 100)

    deleted = tasks.delete_expired_temporary()

    assert deleted == 1
    assert not Conversation.objects.filter(pk=old.pk).exists()
    assert set(Conversation.objects.values_list("pk", flat=True)) == {young.pk, kept.pk}
    assert young.expires_at == young.created_at + timedelta(hours=24)
    assert kept.expires_at is None


def test_the_deletion_runs_on_a_beat_schedule():
    from importlib import import_module

    from django.apps import apps

    # A transactional test before this one may have emptied the table the migration filled.
    import_module("apps.chat.migrations.0004_conversation_temporary").create_schedule(apps, None)
    schedule = PeriodicTask.objects.get(task="chat.delete_expired_temporary")

    assert schedule.enabled
    assert schedule.interval.every == 15 and schedule.interval.period == "minutes"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("setting", ["temporary", "memory_off"])
async def test_over_the_socket_nothing_is_embedded_or_learnt(user, llm_stub, setting):
    """A message in a temporary chat, or from a user with memory off, is answered without its
    embedding being asked for, and no reflection follows the reply."""
    import asyncio
    import json

    from asgiref.sync import sync_to_async

    from apps.accounts import services as account_services
    from apps.chat.models import Message
    from tests.chat.conftest import connect_socket

    if setting == "memory_off":
        await sync_to_async(account_services.user_settings_update)(user=user, memory_enabled=False)
    conversation = await Conversation.objects.acreate(owner=user, temporary=setting == "temporary")
    llm_stub.script({"content": "Hello there."})
    communicator = await connect_socket(user, conversation.pk)

    await communicator.send_to(text_data=json.dumps({"content": "I moved to Rome"}))
    async with asyncio.timeout(15):
        while "msg-assistant complete" not in await communicator.receive_from(15):
            pass
    await communicator.disconnect()

    reply = await Message.objects.aget(role="assistant")
    assert reply.content == "Hello there."
    assert [r for r in llm_stub.requests if r["path"].endswith("/embeddings")] == []
    assert reply.trace["memory"]["off"] is True
    assert "reflection" not in reply.trace
