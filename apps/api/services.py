from __future__ import annotations

from django.db import transaction

from apps.chat.models import Conversation, Message
from apps.chat.selectors import open_reply
from apps.chat.services import ChatError, conversation_create, message_send


class ConversationBusy(ChatError):
    pass


@transaction.atomic
def api_turn_start(*, user, conversation: Conversation | None, content: str) -> Message:
    """Save the turn in `conversation`, or in a new one that is not kept if the turn is refused."""
    if conversation is None:
        conversation = conversation_create(user=user)
    try:
        reply = message_send(conversation=conversation, content=content).reply
    except ChatError as exc:
        if open_reply(conversation=conversation) is not None:
            raise ConversationBusy(str(exc)) from exc
        raise
    return reply
