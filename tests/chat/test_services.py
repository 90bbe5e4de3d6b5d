"""Chat services: one reply streams at a time in a conversation."""

from __future__ import annotations

import pytest

from apps.chat import services
from apps.chat.models import Conversation, Message

pytestmark = pytest.mark.django_db


def test_a_retry_waits_while_another_answer_of_the_conversation_streams(user):
    conversation = Conversation.objects.create(owner=user)
    _, first = services.message_send(conversation=conversation, content="one")
    services.message_finish(message=first, status=Message.Status.FAILED, content="", error="x")
    _, second = services.message_send(conversation=conversation, content="two")

    with pytest.raises(services.ChatError, match="Wait for the current answer"):
        services.message_retry(message=first)

    first.refresh_from_db()
    assert first.status == Message.Status.FAILED  # untouched
    services.message_finish(message=second, status=Message.Status.COMPLETE, content="ok")
    assert services.message_retry(message=first).status == Message.Status.PENDING
