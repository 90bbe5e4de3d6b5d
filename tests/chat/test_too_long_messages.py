"""A message longer than the model's window leaves it: refused before it is saved, and one
that was saved and failed as too long goes back into the composer to be edited."""

from __future__ import annotations

import math

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition.answer import AnswerFailed
from apps.cognition.message_room import message_room
from apps.cognition.pipeline import answer_saved_reply
from tests.chat.conftest import connect_socket, receive_until, send_action

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def small_window(config):
    config(context_tokens=1024, answer_max_tokens=256, turns_per_minute=0)


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user)


def _too_long(user, conversation) -> str:
    room = message_room(user=user, conversation=conversation)
    return "word " * math.ceil(room.tokens * room.chars_per_token / 5 + 10)


def _failed_as_too_long(user, conversation) -> Message:
    """A turn saved before the window shrank, answered: it fails as too long."""
    text = _too_long(user, conversation)
    reply = services.message_send(conversation=conversation, content=text).reply

    async def answer():
        with pytest.raises(AnswerFailed):
            async for _ in answer_saved_reply(reply_id=reply.pk):
                pass

    async_to_sync(answer)()
    reply.refresh_from_db()
    return reply


async def test_the_socket_refuses_a_message_over_the_room_before_saving_it(
    user, conversation, small_window, llm_stub
):
    text = await sync_to_async(_too_long)(user, conversation)
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content=text)
    frame = await communicator.receive_from(5)
    assert "characters too long for this model" in frame
    assert not await Message.objects.aexists()
    assert not [r for r in llm_stub.requests if r["path"] == "/v1/chat/completions"]
    await communicator.disconnect()


def test_the_form_refuses_a_message_over_the_room_before_saving_it(
    client, user, conversation, small_window
):
    client.force_login(user)
    response = client.post(
        f"/c/{conversation.pk}/send", {"content": _too_long(user, conversation)}, follow=True
    )
    assert "Your message is about" in response.content.decode()
    assert not Message.objects.exists()


def test_the_page_shows_the_room_for_a_message(client, user, conversation, small_window):
    client.force_login(user)
    room = message_room(user=user, conversation=conversation)
    for url in ("/", f"/c/{conversation.pk}/"):
        body = client.get(url).content.decode()
        assert f'id="composer-room" class="composer-room" data-tokens="{room.tokens}"' in body
        total = math.floor(room.tokens * room.chars_per_token)
        assert f"Room for about {total:,} characters." in body


def test_a_turn_failed_as_too_long_offers_edit_not_retry(
    client, user, conversation, small_window, llm_stub
):
    reply = _failed_as_too_long(user, conversation)
    assert reply.status == "failed" and reply.trace["too_long"]["needed"] > 0
    client.force_login(user)
    body = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "Edit the message" in body and 'class="retry-form"' not in body


async def test_edit_takes_the_turn_off_every_page_and_puts_its_text_in_the_composer(
    user, conversation, small_window, llm_stub
):
    reply = await sync_to_async(_failed_as_too_long)(user, conversation)
    question = await Message.objects.aget(pk=reply.reply_to_id)
    mine = await connect_socket(user, conversation.pk)
    other_page = await connect_socket(user, conversation.pk)
    await send_action(mine, action="edit", message_id=reply.pk)
    frames = "".join(await receive_until(mine, 'id="composer-box"'))
    assert f'<div id="msg-{question.pk}" hx-swap-oob="delete">' in frames
    assert f'<div id="msg-{reply.pk}" hx-swap-oob="delete">' in frames
    assert question.content[:100] in frames and "data-autosend" not in frames
    removed = await receive_until(other_page, f'id="msg-{reply.pk}" hx-swap-oob="delete"')
    assert 'id="composer-box"' not in "".join(removed)
    assert not await Message.objects.aexists()
    await mine.disconnect()
    await other_page.disconnect()


def test_edit_without_a_script_puts_the_text_back_in_the_composer(
    client, user, conversation, small_window, llm_stub
):
    reply = _failed_as_too_long(user, conversation)
    text = Message.objects.get(pk=reply.reply_to_id).content
    client.force_login(user)
    response = client.post(f"/c/{conversation.pk}/edit", {"message_id": reply.pk}, follow=True)
    body = response.content.decode()
    assert text.strip()[:100] in body and "data-autosend" not in body
    assert not Message.objects.exists()
    # Once: a reload shows an empty composer.
    assert text.strip()[:100] not in client.get(f"/c/{conversation.pk}/").content.decode()


def test_only_a_failed_answer_can_be_taken_back(user, conversation):
    sent = services.message_send(conversation=conversation, content="hello")
    with pytest.raises(services.ChatError):
        services.message_withdraw(message=sent.reply)
    with pytest.raises(services.ChatError):
        services.message_withdraw(message=sent.question)


def test_a_failed_turn_is_not_taken_back_while_another_answer_is_written(
    user, conversation, small_window, llm_stub
):
    failed = _failed_as_too_long(user, conversation)
    services.message_send(conversation=conversation, content="and this?")
    with pytest.raises(services.ChatError, match="Wait for the current answer"):
        services.message_withdraw(message=failed)
    assert Message.objects.filter(pk=failed.pk).exists()
