"""Pushes to open pages: each renders the same partial the page uses and sends it to a group.

The htmx websocket extension swaps every pushed fragment into the page by its element id.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.template.loader import render_to_string
from django.utils.html import escape
from redis.exceptions import RedisError

from apps.chat.models import Conversation, Message
from apps.chat.selectors import messages_of

logger = logging.getLogger(__name__)


def conversation_group(conversation_id: int) -> str:
    return f"conversation-{conversation_id}"


def user_group(user_id: int) -> str:
    return f"user-{user_id}"


def render_message(message: Message) -> str:
    # Its "What I used" panel is read and drawn when opened (views.message_used): a finished
    # answer is pushed to every open page, and few of them open it.
    return render_to_string("chat/_message.html", {"message": message, "lazy_trace": True})


def render_new_messages(messages: list[Message]) -> str:
    inner = "".join(render_message(m) for m in messages)
    return (
        # Hidden, not deleted: every later push finds it again (a missing target is an error).
        '<p id="chat-empty" class="empty-state" hx-swap-oob="true" hidden></p>'
        f'<div id="messages" hx-swap-oob="beforeend">{inner}</div>'
    )


def render_branch(conversation: Conversation) -> str:
    """The messages of the branch shown, in place of those the page shows."""
    inner = "".join(render_message(m) for m in messages_of(conversation=conversation))
    return (
        '<div id="messages" class="messages-list" aria-live="polite">'
        f'<p id="chat-empty" class="empty-state" hidden></p>{inner}</div>'
    )


def render_source(message_id: int, text: str) -> str:
    return f'<textarea hidden class="md-src" id="msg-{message_id}-src">{escape(text)}</textarea>'


def render_status(message_id: int, text: str) -> str:
    """The line under a reply that says what happens before its text comes; "" hides it."""
    hidden = "" if text else " hidden"
    return (
        f'<p class="msg-note msg-status" id="msg-{message_id}-status" role="status"{hidden}>'
        f"{escape(text)}</p>"
    )


def render_thinking(message_id: int, text: str, *, first: bool) -> str:
    """A reasoning model's thinking while it streams: the first push shows the fold ("Thinking…",
    closed), the later ones only its text, so a fold the user opened stays open."""
    if first:
        return (
            f'<details class="reasoning" id="msg-{message_id}-thinking"><summary>Thinking…'
            f'</summary><div class="reasoning-body" id="msg-{message_id}-thinking-body">'
            f"{escape(text)}</div></details>"
        )
    return (
        f'<div class="reasoning-body" id="msg-{message_id}-thinking-body" '
        f'hx-swap-oob="innerHTML">{escape(text)}</div>'
    )


def render_turn_status(message_id: int, states: dict[str, tuple[str, str]]) -> str:
    """The turn's status line while it runs (pipeline.TurnRun.states)."""
    from apps.chat.turn_status import live_parts

    return render_to_string(
        "chat/_turn_status.html", {"reply_id": message_id, "parts": live_parts(states)}
    )


def render_final_turn_status(message: Message) -> str:
    from apps.chat.turn_status import final_parts

    return render_to_string(
        "chat/_turn_status.html", {"reply_id": message.pk, "parts": final_parts(message)}
    )


def render_composer(
    conversation: Conversation,
    open_reply: Message | None,
    *,
    max_chars: int | None,
    draft: str = "",
) -> str:
    """The message box; `max_chars` is the configured size limit, for its `maxlength`;
    `draft` the text it holds (a message taken back to be edited)."""
    return render_to_string(
        "chat/_composer.html",
        {
            "conversation": conversation,
            "open_reply": open_reply,
            "max_chars": max_chars,
            "draft": draft,
        },
    )


def render_removed(message_ids: list[int]) -> str:
    """Takes the messages off the page."""
    return "".join(f'<div id="msg-{pk}" hx-swap-oob="delete"></div>' for pk in message_ids)


# Every notice can be closed; one that is not an error also goes by itself (static/js/prefs.js).
CLOSE_NOTICE = (
    '<button type="button" class="btn btn-sm btn-ghost notice-close" data-close-notice'
    ' aria-label="Close this notice">×</button>'
)


# No notice: what a send that went through puts in the notice's place.
NO_NOTICE = '<div id="chat-notice"></div>'


def render_notice(text: str) -> str:
    """A sentence under the messages that is not an error (what a deletion forgot)."""
    if not text:
        return NO_NOTICE
    return (
        f'<div id="chat-notice" class="chat-notice" role="status" data-seconds="12">'
        f"{escape(text)} {CLOSE_NOTICE}</div>"
    )


def render_error(text: str) -> str:
    """An error under the messages; "" clears the last one."""
    if not text:
        return NO_NOTICE
    return (
        f'<div id="chat-notice" class="chat-notice error" role="alert">'
        f"{escape(text)} {CLOSE_NOTICE}</div>"
    )


async def push(group: str, html: str, *, sender=None, others: bool = True) -> None:
    """Send a fragment to every page in the group; `sender` (a consumer) gets it directly.

    `others` False: no page but the sender's listens (`others_listening`), so the fragment
    skips the channel layer, a publish and its delivery back to this very process."""
    event = {"type": "chat.fragment", "html": html}
    if sender is not None and await sender.send_direct(html):
        if not others:
            return
        event["skip"] = sender.channel_name
    try:
        await get_channel_layer().group_send(group, event)
    except (RedisError, OSError) as exc:
        # Redis is down (restarting): the asking page got the fragment directly, and the other
        # pages read the conversation again when their socket reconnects.
        logger.warning("pushing to %s failed: %s", group, exc)


async def others_listening(group: str, sender) -> bool:
    """Does a page besides `sender` (a consumer in the group) listen to the group, in this web
    process or another? True when it cannot tell."""
    layer = get_channel_layer()
    try:
        channel = layer._get_group_channel_name(group)
        if layer.groups.get(channel, set()) - {sender.channel_name}:
            return True
        # Every web process with a page in the group subscribes to it once: this one does.
        shard = layer._get_shard(channel)
        shard._ensure_redis()
        [(_, subscribers)] = await shard._redis.pubsub_numsub(channel)
    except (AttributeError, RedisError, OSError):
        # Another channel layer than channels_redis' pub/sub one, or Redis is away.
        return True
    return subscribers > 1


def conversation_changed(*, conversation: Conversation) -> None:
    """The sidebar entry of a conversation changed (title); push it to the owner's pages."""
    async_to_sync(push)(user_group(conversation.owner_id), render_conversation_item(conversation))
    async_to_sync(push)(
        conversation_group(conversation.pk), render_conversation_header(conversation)
    )


def render_conversation_item(conversation: Conversation) -> str:
    """The conversation's sidebar entry, swapped in by its id."""
    return render_to_string(
        "chat/_conversation_item.html", {"conversation": conversation, "oob": True}
    )


def render_conversation_header(conversation: Conversation) -> str:
    """The header of the conversation's page, with its name."""
    # A push cannot carry a <title> as an htmx response does (the rename's): chat.js sets the
    # tab's from the header's data-tab-title.
    shown = escape(conversation.display_title)
    return (
        f'<h1 class="chat-title" id="chat-title" hx-swap-oob="true" '
        f'data-tab-title="{shown} · Thalamus">{shown}</h1>'
    )


def branch_changed(*, conversation: Conversation) -> None:
    """Another branch is shown (a page without the socket switched it): push it to the
    conversation's open pages."""
    async_to_sync(push)(conversation_group(conversation.pk), render_branch(conversation))


def receipt_changed(*, message_id: int) -> None:
    """An answer's memory receipt changed (reflection ran, a memory was corrected): once
    committed, push it to the conversation's open pages."""

    def send() -> None:
        message = Message.objects.filter(pk=message_id).first()
        if message is not None:
            # Its summary and body only: a receipt someone has open stays open.
            html = render_to_string(
                "chat/_receipt.html", {"message": message, "receipt_parts": True}
            )
            # The status line's reflection part too.
            html += render_final_turn_status(message)
            async_to_sync(push)(conversation_group(message.conversation_id), html)

    transaction.on_commit(send)
