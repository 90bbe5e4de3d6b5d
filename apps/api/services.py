from __future__ import annotations

from django.db import transaction

from apps.chat.conversation_services import conversation_create
from apps.chat.models import Conversation
from apps.chat.selectors import open_reply
from apps.chat.services import ChatError, SentTurn, message_send
from apps.core.models import RuntimeConfig


class ConversationBusy(ChatError):
    pass


def api_turn_start(
    *, user, conversation: Conversation | None, content: str, config: RuntimeConfig
) -> SentTurn:
    """Save the turn in `conversation`, or in a new one that is not kept if the turn is refused.

    The turn also carries the last `config.short_term_window` saved messages it answers. Only
    a new conversation needs a transaction around the save: the send statement is one
    statement, and each transaction costs the turn round trips before its answer is asked for.
    """
    if conversation is not None:
        return _send(conversation=conversation, content=content, config=config)
    with transaction.atomic():
        conversation = conversation_create(user=user, via_api=True)
        return _send(conversation=conversation, content=content, config=config)


def _send(*, conversation: Conversation, content: str, config: RuntimeConfig) -> SentTurn:
    try:
        return message_send(
            conversation=conversation,
            content=content,
            config=config,
            history=config.short_term_window,
        )
    except ChatError as exc:
        if open_reply(conversation=conversation) is not None:
            raise ConversationBusy(str(exc)) from exc
        raise
