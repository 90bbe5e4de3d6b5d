from __future__ import annotations

import math
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.chat.selectors import turns_since
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

TITLE_FALLBACK_CHARS = 60
TURN_RATE_WINDOW = timedelta(minutes=1)


class ChatError(ValueError):
    """A request the chat refuses, with a sentence for the user."""


class ChatRateLimited(ChatError):
    """Too many turns in the last minute; another is allowed in `retry_after` seconds."""

    def __init__(self, message: str, *, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


def conversation_create(*, user, title: str = "") -> Conversation:
    return Conversation.objects.create(owner=user, title=title[:200])


def conversation_start(*, user) -> Conversation:
    """A conversation to type into: the newest one if it is still empty, else a new one."""
    latest = Conversation.objects.filter(owner=user).order_by("-updated_at", "-pk").first()
    if latest is not None and not latest.messages.exists():
        return latest
    return conversation_create(user=user)


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    conversation.title = title.strip()[:200]
    conversation.save(update_fields=["title"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    conversation.delete()


@transaction.atomic
def message_send(
    *, conversation: Conversation, content: str, config: RuntimeConfig | None = None
) -> tuple[Message, Message]:
    """Save the user's message and an empty reply to fill, before any LLM call."""
    content = content.strip()
    if not content:
        raise ChatError("Type a message first.")
    config = config or runtime_config()
    if len(content) > config.max_message_chars:
        raise ChatError(
            f"Your message is {len(content):,} characters long; "
            f"the limit is {config.max_message_chars:,}."
        )
    # One statement takes the conversation's row lock (one send at a time per conversation) and
    # moves it to the top of the list; a refusal below rolls it back.
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
    if _answer_streaming(conversation.pk):
        raise ChatError("Wait for the current answer to finish, or stop it.")
    if config.turns_per_minute:
        _refuse_if_too_fast(user_id=conversation.owner_id, limit=config.turns_per_minute)
    user_message = Message.objects.create(
        conversation=conversation, role=Message.Role.USER, content=content
    )
    reply = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.PENDING,
        reply_to=user_message,
    )
    return user_message, reply


def _answer_streaming(conversation_id: int) -> bool:
    return Message.objects.filter(
        conversation_id=conversation_id,
        role=Message.Role.ASSISTANT,
        status__in=[Message.Status.PENDING, Message.Status.STREAMING],
    ).exists()


def _refuse_if_too_fast(*, user_id: int, limit: int) -> None:
    now = timezone.now()
    # The limit-th newest turn of the last minute, if any: until it is a minute old, one more
    # turn would be one too many.
    recent = turns_since(user_id=user_id, since=now - TURN_RATE_WINDOW)
    limiting = list(recent.values_list("created_at", flat=True)[limit - 1 : limit])
    if not limiting:
        return
    retry_after = max(1, math.ceil((limiting[0] + TURN_RATE_WINDOW - now).total_seconds()))
    raise ChatRateLimited(
        f"You are sending messages too fast: at most {limit} per minute. "
        f"Try again in {retry_after} second{'' if retry_after == 1 else 's'}.",
        retry_after=retry_after,
    )


@transaction.atomic
def message_retry(*, message: Message) -> Message:
    if message.role != Message.Role.ASSISTANT or message.status not in {
        Message.Status.FAILED,
        Message.Status.CANCELLED,
    }:
        raise ChatError("Only a failed or stopped answer can be retried.")
    # One reply streams at a time in a conversation, as for a new message.
    Conversation.objects.filter(pk=message.conversation_id).update(updated_at=timezone.now())
    if _answer_streaming(message.conversation_id):
        raise ChatError("Wait for the current answer to finish, or stop it.")
    message.content = ""
    message.error = ""
    message.status = Message.Status.PENDING
    message.trace = {}
    message.ttft_ms = message.latency_ms = None
    message.prompt_tokens = message.completion_tokens = None
    message.save()
    return message


def message_start_streaming(*, message: Message, model: str, trace: dict) -> None:
    Message.objects.filter(pk=message.pk).update(
        status=Message.Status.STREAMING, model=model, trace=trace
    )


def message_finish(
    *,
    message: Message,
    status: str,
    content: str,
    error: str = "",
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    ttft_ms: float | None = None,
    latency_ms: float | None = None,
    trace: dict | None = None,
) -> Message:
    message.status = status
    message.content = content
    message.error = error
    message.prompt_tokens = prompt_tokens
    message.completion_tokens = completion_tokens
    message.ttft_ms = ttft_ms
    message.latency_ms = latency_ms
    if trace is not None:
        message.trace = trace
    message.save(
        update_fields=[
            "status",
            "content",
            "error",
            "prompt_tokens",
            "completion_tokens",
            "ttft_ms",
            "latency_ms",
            "trace",
        ]
    )
    Conversation.objects.filter(pk=message.conversation_id).update(updated_at=timezone.now())
    if status == Message.Status.COMPLETE:
        needs_title = Conversation.objects.filter(pk=message.conversation_id, title="").exists()
        if needs_title:
            from apps.chat import tasks

            transaction.on_commit(lambda: tasks.title_conversation.delay(message.conversation_id))
        # Memories form in the background, from sync code and only once the reply is saved.
        from apps.cognition import tasks as cognition_tasks

        cognition_tasks.reflect.delay_on_commit(message.pk)
    return message


def fallback_title(text: str) -> str:
    words = " ".join(text.split())
    if len(words) <= TITLE_FALLBACK_CHARS:
        return words
    return words[:TITLE_FALLBACK_CHARS].rsplit(" ", 1)[0] + "…"


def conversation_set_title_if_empty(*, conversation_id: int, title: str) -> bool:
    title = title.strip().strip("\"'").strip()[:200]
    if not title:
        return False
    return bool(Conversation.objects.filter(pk=conversation_id, title="").update(title=title))
