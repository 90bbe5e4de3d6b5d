"""Conversations: started, renamed, given a model, titled, deleted, and the temporary ones
expired."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from apps.chat.models import TEMPORARY_LIFETIME, Conversation


def conversation_create(
    *, user, title: str = "", temporary: bool = False, via_api: bool = False
) -> Conversation:
    return Conversation.objects.create(
        owner=user, title=title[:200], temporary=temporary, via_api=via_api
    )


def conversation_start(*, user, temporary: bool = False) -> Conversation:
    """A conversation to type into: the newest one if it is still empty (and of the kind asked
    for, kept or temporary), else a new one."""
    latest = Conversation.objects.filter(owner=user).order_by("-updated_at", "-pk").first()
    if latest is not None and latest.temporary == temporary and not latest.messages.exists():
        return latest
    return conversation_create(user=user, temporary=temporary)


def conversations_delete_expired(*, now: datetime | None = None) -> int:
    """Delete the temporary chats started more than TEMPORARY_LIFETIME ago; how many went."""
    cutoff = (now or timezone.now()) - TEMPORARY_LIFETIME
    _, per_model = Conversation.objects.filter(temporary=True, created_at__lt=cutoff).delete()
    return per_model.get(Conversation._meta.label, 0)


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    conversation.title = title.strip()[:200]
    conversation.save(update_fields=["title"])
    return conversation


def conversation_model_pick(*, conversation: Conversation, model: str) -> Conversation:
    """Remember the model the conversation is answered by ("": the configured chat model); the
    caller has checked that it is offered (apps/core/llm/chat_models.py)."""
    conversation.chat_model = model[:200]
    conversation.save(update_fields=["chat_model"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    conversation.delete()


# A claim older than the title task's time limit is its dead worker's: it may be taken again.
TITLE_CLAIM_SECONDS = 600


def conversation_title_claim(*, conversation_id: int) -> bool:
    """Claim the asking for an untitled conversation's title; False when it has one, or another
    run asked or is asking (each of the first replies queues the title task)."""
    stale = timezone.now() - timedelta(seconds=TITLE_CLAIM_SECONDS)
    return bool(
        Conversation.objects.filter(pk=conversation_id, title="")
        .filter(Q(title_asked_at=None) | Q(title_asked_at__lt=stale))
        .update(title_asked_at=timezone.now())
    )


def conversation_title_release(*, conversation_id: int) -> None:
    """The claimed asking gave way to the chat: its next run claims it again."""
    Conversation.objects.filter(pk=conversation_id, title="").update(title_asked_at=None)


def conversation_set_title_if_empty(*, conversation_id: int, title: str) -> bool:
    title = title.strip().strip("\"'").strip()[:200]
    if not title:
        return False
    return bool(Conversation.objects.filter(pk=conversation_id, title="").update(title=title))
