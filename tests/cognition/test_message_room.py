"""The room the chat model's window leaves a message: what the composer shows and the send
path checks is what the answer's fit accepts."""

from __future__ import annotations

import math

import pytest

from apps.chat import open_replies, services
from apps.chat.models import Conversation
from apps.cognition.message_room import message_room
from apps.cognition.pipeline import prepare_saved_reply
from apps.cognition.turn_request import MessageTooLong

pytestmark = pytest.mark.django_db


def _longest_fitting(room) -> str:
    return "x" * math.floor(room.tokens * room.chars_per_token)


def test_the_room_is_exactly_what_the_answers_fit_accepts(user, llm_stub, config):
    config(context_tokens=1024, answer_max_tokens=256, turns_per_minute=0)
    conversation = Conversation.objects.create(owner=user)
    room = message_room(user=user, conversation=conversation)
    assert 0 < room.tokens < 1024 - 256

    longest = _longest_fitting(room)
    assert room.refusal(longest) == ""
    reply = services.message_send(conversation=conversation, content=longest).reply
    prepare_saved_reply(reply_id=reply.pk)
    open_replies.message_fail_open(reply_id=reply.pk, error="done")

    one_more = longest + "x"
    assert room.refusal(one_more) == (
        f"Your message is about {len(one_more) - room.characters:,} characters too long for "
        "this model. Shorten it, or send it in parts."
    )
    reply = services.message_send(conversation=conversation, content=one_more).reply
    with pytest.raises(MessageTooLong):
        prepare_saved_reply(reply_id=reply.pk)


def test_the_users_instructions_take_their_share_of_the_room(user, config):
    from apps.accounts.models import UserSettings

    config(context_tokens=1024, answer_max_tokens=256)
    before = message_room(user=user).tokens
    UserSettings.objects.create(user=user, about_me="I keep bees. " * 40)
    assert message_room(user=user).tokens < before - 100
