"""Open replies (pending or streaming): at most one a conversation, each held by a lease in the
shared cache while its process writes it. One whose process died is failed when found, so its
conversation is not busy for good; a reply stopped or refused before it started is closed."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timedelta

from django.core.cache import cache
from django.db import IntegrityError
from django.utils import timezone

from apps.chat.errors import ChatError
from apps.chat.models import OPEN_STATUSES, Conversation, Message
from apps.chat.selectors import open_reply

_ONE_OPEN_REPLY = "chat_one_open_reply"
BUSY = "Wait for the current answer to finish, or stop it."


@contextmanager
def busy_on_conflict():
    """A reply opened by a racing send or retry, caught by the constraint, is refused as busy."""
    try:
        yield
    except IntegrityError as exc:
        if getattr(getattr(exc.__cause__, "diag", None), "constraint_name", "") == _ONE_OPEN_REPLY:
            raise ChatError(BUSY) from exc
        raise


def live_open_reply(*, conversation: Conversation) -> Message | None:
    """The reply being generated in the conversation; one a dead process left open is failed."""
    reply = open_reply(conversation=conversation)
    if reply is not None and message_fail_if_orphaned(
        reply_id=reply.pk, created_at=reply.created_at
    ):
        return None
    return reply


def _close_if_open(reply_id: int, **fields) -> bool:
    return bool(Message.objects.filter(pk=reply_id, status__in=OPEN_STATUSES).update(**fields))


# While a reply is being generated, its process holds a lease on it in the shared cache, renewed
# as it runs (answer_reply). An open reply without one was left behind by a process that died
# (killed, crashed, the machine restarted) and would keep its conversation busy for good; the
# next send, retry or look at the conversation fails it, and Retry can then regenerate it.
REPLY_LEASE_SECONDS = 30
# A reply is that old at least before it can be found orphaned: its lease is taken just after
# the statement that saves it.
ORPHAN_GRACE = timedelta(seconds=10)
INTERRUPTED = "The answer was interrupted: Thalamus stopped while writing it."


def _lease_key(reply_id: int) -> str:
    return f"chat:reply-lease:{reply_id}"


def reply_lease_renew(*, reply_id: int) -> None:
    cache.set(_lease_key(reply_id), 1, REPLY_LEASE_SECONDS)


def message_fail_if_orphaned(*, reply_id: int, created_at: datetime) -> bool:
    """Fail an open reply that no process is generating; True if it did."""
    if timezone.now() - created_at < ORPHAN_GRACE or cache.get(_lease_key(reply_id)):
        return False
    return _close_if_open(reply_id, status=Message.Status.FAILED, error=INTERRUPTED)


def message_cancel_open(*, reply_id: int) -> None:
    """A reply stopped before anything was generated: cancelled, with no text."""
    _close_if_open(reply_id, status=Message.Status.CANCELLED)


def message_fail_open(*, reply_id: int, error: str, trace: dict | None = None) -> Message | None:
    """A reply that could not be asked for (its prompt cannot fit): failed, with the reason."""
    if not _close_if_open(reply_id, status=Message.Status.FAILED, error=error, trace=trace or {}):
        return None
    return Message.objects.get(pk=reply_id)
