from __future__ import annotations

from django.contrib.postgres.search import SearchQuery
from django.db.models import Count, Exists, Max, Min, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce, Left

from apps.chat.models import OPEN_STATUSES, Conversation, Message
from apps.core.db import fetch_hot, json_value

# The sidebar's filters besides "all": the chats started here, and those /v1 started.
VIA_FILTERS = ("chat", "api")
# Enough of the first message for its first line's words (models.fallback_title).
OPENING_CHARS = 300


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
    return with_opening_words(conversations).order_by("-updated_at", "-pk")


def later_reply(*, conversation_id: int, reply_id: int) -> str | None:
    """The user wrote again since `reply_id`: "complete" when a later reply in the conversation
    is complete, else "open" when one is being written; None when neither (none, or only
    failed and stopped ones)."""
    later = set(
        Message.objects.filter(
            conversation_id=conversation_id,
            role=Message.Role.ASSISTANT,
            pk__gt=reply_id,
            status__in=[Message.Status.COMPLETE, *OPEN_STATUSES],
        ).values_list("status", flat=True)
    )
    if Message.Status.COMPLETE in later:
        return "complete"
    return "open" if later else None


def conversation_for_user(*, user, pk: int) -> Conversation | None:
    return with_opening_words(Conversation.objects.filter(owner=user, pk=pk)).first()


def with_opening_words(conversations: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """Annotate each conversation with the start of the user's first message shown
    (`opening_words`): what it is called until its title lands (`display_title`)."""
    first_question = (
        Message.objects.filter(conversation=OuterRef("pk"), role=Message.Role.USER, active=True)
        .order_by("created_at", "pk")
        .values_list(Left("content", OPENING_CHARS))[:1]
    )
    return conversations.annotate(opening_words=Subquery(first_question))


def messages_of(*, conversation: Conversation) -> QuerySet[Message]:
    """The branch shown, in order, each message with its place among its siblings."""
    # An answer shows what memory forgot when its question was edited (its trace).
    shown = conversation.messages.filter(active=True).select_related("reply_to")
    return with_branch_places(shown).order_by("created_at", "id")


def with_branch_places(messages: QuerySet[Message]) -> QuerySet[Message]:
    """Annotate each message of the branch shown with its place among its siblings (the
    messages following the same message in the same role, oldest first): `branch_count`,
    `branch_index` (from 1), and the ids of the sibling before and after it (`branch_previous`,
    `branch_next`, or None).

    A shown message's siblings are off the branch shown; counting only those keeps messages
    saved without a parent (rows written before branches, by hand or by tests) each on its own.
    """
    siblings = (
        Message.objects.annotate(after=Coalesce("parent_id", 0))
        .filter(
            Q(active=False) | Q(id=OuterRef("id")),
            conversation_id=OuterRef("conversation_id"),
            role=OuterRef("role"),
            after=Coalesce(OuterRef("parent_id"), 0),
        )
        .order_by()
        .values("role")
    )
    return messages.annotate(
        branch_count=Subquery(siblings.annotate(n=Count("id")).values("n")),
        branch_index=Subquery(
            siblings.filter(id__lte=OuterRef("id")).annotate(n=Count("id")).values("n")
        ),
        branch_previous=Subquery(
            siblings.filter(id__lt=OuterRef("id")).annotate(n=Max("id")).values("n")
        ),
        branch_next=Subquery(
            siblings.filter(id__gt=OuterRef("id")).annotate(n=Min("id")).values("n")
        ),
    )


def branch_place(*, message: Message) -> Message:
    """`message` with its place among its siblings (with_branch_places), read if not yet."""
    if hasattr(message, "branch_count") or message.pk is None:
        return message
    placed = with_branch_places(Message.objects.filter(pk=message.pk)).values(
        "branch_count", "branch_index", "branch_previous", "branch_next"
    )
    for name, value in (placed.first() or {}).items():
        setattr(message, name, value)
    return message


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
    """The last usable messages of the branch shown before `message`, oldest first: at most
    `limit`, as many as `history_kept` keeps."""
    usable = (
        Message.objects.filter(
            conversation_id=message.conversation_id, pk__lt=message.pk, active=True
        )
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


_REPLY_TRACES_SQL = """
SELECT reply_to_id, trace -> 'note', trace -> 'history_from'
  FROM chat_message
 WHERE conversation_id = %(conversation)s
   AND role = %(assistant)s
   AND reply_to_id IS NOT NULL
   AND active
 ORDER BY id DESC
 LIMIT %(limit)s
"""


def reply_traces(*, conversation_id: int, limit: int) -> list[tuple[int, object, object]]:
    """(question id, note, history_from) of the conversation's last `limit` answers, newest
    first: what memory added to the message each answers, and the first message of the history
    each was sent with (see apps.cognition.notes).

    Read on the way to every answer, with its parameters bound: the ORM's query with two JSON
    paths cost about 1 ms of the web process's CPU to build.
    """
    rows = fetch_hot(
        _REPLY_TRACES_SQL,
        {"conversation": conversation_id, "assistant": Message.Role.ASSISTANT, "limit": limit},
        prepare=True,
    )
    return [(question, json_value(note), json_value(start)) for question, note, start in rows]
