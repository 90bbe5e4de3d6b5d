"""Branches: which version of a message the conversation shows, and a message taken off it or
deleted with all that follows it."""

from __future__ import annotations

from django.db import connection, transaction
from django.utils import timezone

from apps.chat.errors import ChatError
from apps.chat.models import Conversation, Message
from apps.chat.open_replies import BUSY, live_open_reply

# Show another branch: the chosen message and, at each level below it, its newest child become
# the branch shown; what was shown from the chosen message's level down leaves it. (The newest
# child, not the last one shown: a branch reads as it was last written.)
_BRANCH_SHOW_SQL = """
WITH RECURSIVE path AS (
    SELECT id FROM chat_message WHERE id = %(chosen)s AND conversation_id = %(conversation)s
    UNION ALL
    SELECT child.id FROM path CROSS JOIN LATERAL (
        SELECT id FROM chat_message c WHERE c.parent_id = path.id ORDER BY c.id DESC LIMIT 1
    ) AS child
), level AS (
    -- The message shown at the chosen one's level (its sibling on the branch shown).
    SELECT min(id) AS id FROM chat_message
    WHERE conversation_id = %(conversation)s AND active AND role = %(role)s
      AND parent_id IS NOT DISTINCT FROM %(parent)s::bigint
)
UPDATE chat_message SET active = id IN (SELECT id FROM path)
WHERE conversation_id = %(conversation)s
  AND ((active AND id >= coalesce((SELECT id FROM level), %(chosen)s))
       OR id IN (SELECT id FROM path))
"""


@transaction.atomic
def branch_show(*, message: Message) -> None:
    """Show the branch through `message` (one of a set of siblings: the messages that follow
    the same message in the same role)."""
    Conversation.objects.filter(pk=message.conversation_id).update(updated_at=timezone.now())
    if live_open_reply(conversation=message.conversation) is not None:
        raise ChatError(BUSY)
    with connection.cursor() as cursor:
        cursor.execute(
            _BRANCH_SHOW_SQL,
            {
                "chosen": message.pk,
                "conversation": message.conversation_id,
                "role": message.role,
                "parent": message.parent_id,
            },
        )


# A message with all that follows it, on every branch below it.
_SUBTREE = """
WITH RECURSIVE subtree AS (
    SELECT id FROM chat_message WHERE id = %(message)s AND conversation_id = %(conversation)s
    UNION ALL
    SELECT c.id FROM chat_message c JOIN subtree s ON c.parent_id = s.id
)
"""


@transaction.atomic
def message_retire(*, message: Message) -> None:
    """Take one of the user's messages and all that follows it off the branch shown, as the
    first step of deleting it (memory then reads what is still shown)."""
    if message.role != Message.Role.USER:
        raise ChatError("Only your own messages can be deleted.")
    Conversation.objects.filter(pk=message.conversation_id).update(updated_at=timezone.now())
    if live_open_reply(conversation=message.conversation) is not None:
        raise ChatError(BUSY)
    with connection.cursor() as cursor:
        cursor.execute(
            _SUBTREE
            + "UPDATE chat_message SET active = false WHERE id IN (SELECT id FROM subtree)",
            {"message": message.pk, "conversation": message.conversation_id},
        )


@transaction.atomic
def message_delete(*, message: Message) -> None:
    """Delete one of the user's messages and everything that follows it; the branch shown
    then goes through its newest other version, if it has one, or ends where it began."""
    message_retire(message=message)
    with connection.cursor() as cursor:
        cursor.execute(
            _SUBTREE + "DELETE FROM chat_message WHERE id IN (SELECT id FROM subtree)",
            {"message": message.pk, "conversation": message.conversation_id},
        )
    sibling = (
        Message.objects.filter(
            conversation_id=message.conversation_id, role=message.role, parent=message.parent_id
        )
        .order_by("-id")
        .first()
    )
    if message.active and sibling is not None:
        branch_show(message=sibling)
