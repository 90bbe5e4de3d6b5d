"""Edit a message: a new branch from there, and memory takes back what it learned from the old
text (apps.memory.retraction), saying so under the new message."""

from __future__ import annotations

from django.db import transaction

from apps.chat import branch_services
from apps.chat import services as chat_services
from apps.chat.models import Message
from apps.cognition.message_room import message_room
from apps.core.selectors import runtime_config
from apps.memory.retraction import memories_retract_said_in

# The key of an edited message's trace that lists what memory forgot of the old text.
RETRACTED_KEY = "retracted"


def message_edit(*, user, message: Message, content: str) -> chat_services.SentTurn:
    """Send `content` in place of the user's `message`, as a new branch beside it, refused as
    a send would be (busy, too fast, too long); what was learned only from the old text is
    forgotten, and the new message's trace lists it."""
    conversation = message.conversation
    config = runtime_config()
    room = message_room(user=user, conversation=conversation, config=config)
    with transaction.atomic():
        sent = chat_services.message_send(
            conversation=conversation,
            content=content,
            config=config,
            refusal=room.refusal,
            replacing=message,
        )
        forgot = memories_retract_said_in(owner_id=conversation.owner_id, message_id=message.pk)
        if forgot:
            chat_services.message_trace_put(
                message_id=sent.question.pk, key=RETRACTED_KEY, value={"forgot": forgot}
            )
            sent.question.trace = {RETRACTED_KEY: {"forgot": forgot}}
    return sent


def message_delete(*, message: Message) -> list[str]:
    """Delete the user's `message` and what follows it; what memory learned only from it is
    forgotten first (its answers are its source), and returned as sentences."""
    with transaction.atomic():
        # Off the branch first: what only it and what follows it said is supported by nothing.
        branch_services.message_retire(message=message)
        forgot = memories_retract_said_in(
            owner_id=message.conversation.owner_id, message_id=message.pk
        )
        branch_services.message_delete(message=message)
    return forgot


def deleted_notice(forgot: list[str]) -> str:
    """What the page says once a message is deleted."""
    return "Deleted." + (f" Forgot: {'; '.join(forgot)}." if forgot else "")
