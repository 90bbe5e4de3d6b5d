from __future__ import annotations

from django.contrib.postgres.search import SearchQuery
from django.db.models import Exists, OuterRef, Q, QuerySet

from apps.chat.models import OPEN_STATUSES, Conversation, Message


def conversations_for_user(*, user, query: str = "") -> QuerySet[Conversation]:
    conversations = Conversation.objects.filter(owner=user)
    query = query.strip()
    if query:
        matching_messages = Message.objects.filter(
            conversation=OuterRef("pk"), search=SearchQuery(query, config="simple")
        )
        conversations = conversations.filter(Q(title__icontains=query) | Exists(matching_messages))
    return conversations.order_by("-updated_at", "-pk")


def conversation_for_user(*, user, pk: int) -> Conversation | None:
    return Conversation.objects.filter(owner=user, pk=pk).first()


def messages_of(*, conversation: Conversation) -> QuerySet[Message]:
    return conversation.messages.order_by("created_at", "id")


def open_reply(*, conversation: Conversation) -> Message | None:
    return (
        conversation.messages.filter(
            role=Message.Role.ASSISTANT,
            status__in=OPEN_STATUSES,
        )
        .order_by("-created_at")
        .first()
    )


def message_of(*, conversation: Conversation, message_id: int | None) -> Message | None:
    """The conversation's message with that id (as a page or a socket names it), if any."""
    if message_id is None:
        return None
    return conversation.messages.filter(pk=message_id).first()


def history_before(*, message: Message, limit: int) -> list[Message]:
    """The last `limit` usable messages before `message`, oldest first."""
    rows = (
        Message.objects.filter(conversation_id=message.conversation_id, pk__lt=message.pk)
        .exclude(status=Message.Status.FAILED)
        .exclude(content="")
        .order_by("-pk")[:limit]
    )
    return list(reversed(rows))
