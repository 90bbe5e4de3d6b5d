from __future__ import annotations

from django.db import transaction

from apps.chat.conversation_services import conversation_create
from apps.chat.models import Conversation
from apps.chat.selectors import open_reply
from apps.chat.services import ChatError, SentTurn, message_send


class ConversationBusy(ChatError):
    pass


@transaction.atomic
def api_turn_start(
    *, user, conversation: Conversation | None, content: str, history: int = 0
) -> SentTurn:
    """Save the turn in `conversation`, or in a new one that is not kept if the turn is refused.

    With `history`, the turn also carries the last that many saved messages it answers.
    """
    if conversation is None:
        conversation = conversation_create(user=user, via_api=True)
    try:
        return message_send(conversation=conversation, content=content, history=history)
    except ChatError as exc:
        if open_reply(conversation=conversation) is not None:
            raise ConversationBusy(str(exc)) from exc
        raise
