"""Limits on a turn: an empty or too long message, and too many messages a minute."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.chat import broadcasts, services
from apps.chat.models import Conversation, Message
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config
from apps.core.services import runtime_config_save

pytestmark = pytest.mark.django_db


def _configure(**fields) -> None:
    runtime_config_save(config=RuntimeConfig(**fields))


def _send_in_a_new_conversation(user, content: str = "hello"):
    conversation = Conversation.objects.create(owner=user)
    return services.message_send(conversation=conversation, content=content)


@pytest.mark.parametrize("content", ["", "   \n\t "])
def test_an_empty_message_is_refused_and_nothing_is_saved(user, content):
    conversation = Conversation.objects.create(owner=user)
    with pytest.raises(services.ChatError, match="^Type a message first.$"):
        services.message_send(conversation=conversation, content=content)
    assert not Message.objects.exists()


def test_a_message_over_the_default_limit_is_refused_with_its_length_and_nothing_is_saved(user):
    conversation = Conversation.objects.create(owner=user)
    with pytest.raises(services.ChatError) as caught:
        services.message_send(conversation=conversation, content="x" * 40_123)
    assert str(caught.value) == "Your message is 40,123 characters long; the limit is 32,000."
    assert not isinstance(caught.value, services.ChatRateLimited)
    assert not Message.objects.exists()

    user_message, _ = services.message_send(conversation=conversation, content="x" * 32_000)
    assert len(user_message.content) == 32_000


def test_the_size_limit_follows_the_runtime_configuration(user):
    _configure(max_message_chars=10)
    conversation = Conversation.objects.create(owner=user)
    with pytest.raises(services.ChatError, match="is 11 characters long; the limit is 10"):
        services.message_send(conversation=conversation, content="  elevenchars  ")
    assert not Message.objects.exists()
    services.message_send(conversation=conversation, content="  ten chars  ")
    assert Message.objects.get(role="user").content == "ten chars"


def test_too_many_turns_a_minute_are_refused_with_when_to_retry(user, other_user):
    _configure(turns_per_minute=3)
    turns = [_send_in_a_new_conversation(user)[0] for _ in range(3)]
    now = timezone.now()
    for turn, age in zip(turns, [48, 30, 10], strict=True):
        Message.objects.filter(pk=turn.pk).update(created_at=now - timedelta(seconds=age))

    conversation = Conversation.objects.create(owner=user)
    with pytest.raises(services.ChatRateLimited) as caught:
        services.message_send(conversation=conversation, content="one more")
    assert caught.value.retry_after == 12
    assert str(caught.value) == (
        "You are sending messages too fast: at most 3 per minute. Try again in 12 seconds."
    )
    assert not conversation.messages.exists()
    assert Message.objects.filter(role="user").count() == 3

    # Another user has a limit of their own.
    _send_in_a_new_conversation(other_user)

    # A minute after the oldest turn, the next one is allowed.
    Message.objects.filter(pk=turns[0].pk).update(created_at=now - timedelta(seconds=61))
    services.message_send(conversation=conversation, content="one more")
    assert conversation.messages.filter(role="user").count() == 1


def test_retrying_a_failed_answer_is_not_a_new_turn(user):
    _configure(turns_per_minute=1)
    _, reply = _send_in_a_new_conversation(user)
    services.message_finish(message=reply, status=Message.Status.FAILED, content="", error="x")

    retried = services.message_retry(message=reply)
    assert retried.status == Message.Status.PENDING
    with pytest.raises(services.ChatRateLimited, match="at most 1 per minute"):
        _send_in_a_new_conversation(user)
    assert Message.objects.filter(role="user").count() == 1


def test_zero_turns_per_minute_means_no_limit(user):
    _configure(turns_per_minute=0)
    for _ in range(25):
        _send_in_a_new_conversation(user)
    assert Message.objects.filter(role="user").count() == 25


def test_the_rate_check_costs_one_query(user):
    def queries_of_a_turn() -> int:
        conversation = Conversation.objects.create(owner=user)
        runtime_config()  # cached, as between turns
        with CaptureQueriesContext(connection) as captured:
            services.message_send(conversation=conversation, content="hi")
        return len(captured)

    _configure(turns_per_minute=0)
    unlimited = queries_of_a_turn()
    _configure(turns_per_minute=100)
    assert queries_of_a_turn() == unlimited + 1


def test_the_admin_validates_the_limits():
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as caught:
        RuntimeConfig(max_message_chars=0, turns_per_minute=5000).full_clean()
    assert set(caught.value.message_dict) == {"max_message_chars", "turns_per_minute"}
    RuntimeConfig(max_message_chars=1, turns_per_minute=0).full_clean()


def test_the_composer_stops_a_too_long_message_in_the_browser(client, user):
    client.force_login(user)
    conversation = Conversation.objects.create(owner=user)
    assert 'maxlength="32000"' in client.get(f"/c/{conversation.pk}/").content.decode()
    _configure(max_message_chars=500)
    assert 'maxlength="500"' in client.get(f"/c/{conversation.pk}/").content.decode()


def test_without_javascript_a_too_long_message_shows_the_sentence(client, user):
    client.force_login(user)
    conversation = Conversation.objects.create(owner=user)
    response = client.post(f"/c/{conversation.pk}/send", {"content": "y" * 32_001}, follow=True)
    assert "Your message is 32,001 characters long; the limit is 32,000." in (
        response.content.decode()
    )
    assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_shows_the_rate_limit_sentence_and_saves_nothing(user):
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from apps.chat.routing import websocket_urlpatterns

    await sync_to_async(_configure)(turns_per_minute=1)
    await sync_to_async(_send_in_a_new_conversation)(user)
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/c/{conversation.pk}/"
    )
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    await communicator.send_json_to({"action": "send", "content": "again"})
    frame = await communicator.receive_from(5)
    assert 'id="chat-notice"' in frame
    assert "You are sending messages too fast: at most 1 per minute. Try again in " in frame
    assert not await conversation.messages.aexists()
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_the_composer_pushed_from_the_event_loop_survives_a_cold_config_cache(
    user, monkeypatch
):
    from apps.core.selectors import forget_runtime_config

    # As in production: the ORM refuses to run on the event loop (the test settings allow it).
    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE")
    conversation = await Conversation.objects.acreate(owner=user)
    forget_runtime_config()
    assert "maxlength" not in broadcasts.render_composer(conversation, None)
    await sync_to_async(runtime_config)()
    assert 'maxlength="32000"' in broadcasts.render_composer(conversation, None)
