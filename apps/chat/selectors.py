from __future__ import annotations

from django.contrib.postgres.search import SearchQuery
from django.db.models import Exists, OuterRef, Q, QuerySet

from apps.chat.models import OPEN_STATUSES, Conversation, Message

# The sidebar's filters besides "all": the chats started here, and those /v1 started.
VIA_FILTERS = ("chat", "api")


def conversations_for_user(*, user, query: str = "", via: str = "") -> QuerySet[Conversation]:
    """The user's conversations, newest first; `via` one of VIA_FILTERS narrows them."""
    conversations = Conversation.objects.filter(owner=user)
    if via:
        conversations = conversations.filter(via_api=via == "api")
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
    """The last usable messages before `message`, oldest first: at most `limit`, as many as
    `history_kept` keeps."""
    usable = (
        Message.objects.filter(conversation_id=message.conversation_id, pk__lt=message.pk)
        .exclude(status=Message.Status.FAILED)
        .exclude(content="")
    )
    rows = list(reversed(usable.order_by("-pk")[:limit]))
    if len(rows) < limit:
        return rows
    return rows[len(rows) - history_kept(total=usable.count(), window=limit) :]


def history_kept(*, total: int, window: int) -> int:
    """How many of a conversation's `total` messages go into the prompt, at most `window`.

    All of them while they fit; past that, the start moves on in steps of about half the
    window rather than one message a turn, so the prompt begins the same way for several turns
    and a server's prompt cache re-reads only what is new. The step is even (for a window of four
    or more): the history still starts with a user's message.
    """
    if total <= window:
        return total
    step = history_step(window)
    start = -(-(total - window) // step) * step
    return total - start


def history_step(window: int) -> int:
    """How far the history's start moves at a time: about half the window, an even number
    where the window allows it."""
    return window // 4 * 2 or 1


def reply_traces(*, conversation_id: int, limit: int) -> list[tuple[int, object, object]]:
    """(question id, note, history_from) of the conversation's last `limit` answers, newest
    first: what memory added to the message each answers, and the first message of the history
    each was sent with (see apps.cognition.turn_request)."""
    rows = (
        Message.objects.filter(
            conversation_id=conversation_id,
            role=Message.Role.ASSISTANT,
            reply_to__isnull=False,
        )
        .order_by("-pk")
        .values_list("reply_to_id", "trace__note", "trace__history_from")[:limit]
    )
    return list(rows)
