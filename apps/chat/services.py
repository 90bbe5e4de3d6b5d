from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import NamedTuple

from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, transaction
from django.utils import timezone

from apps.accounts.selectors import memory_enabled_for
from apps.chat.admission import TURN_RATE_WINDOW, too_fast, turn_record
from apps.chat.errors import ChatError
from apps.chat.models import OPEN_STATUSES, TEMPORARY_LIFETIME, Conversation, Message
from apps.chat.selectors import history_kept, open_reply
from apps.core.db import fetch_hot, json_value
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config
from apps.core.services import task_send_on_commit

TITLE_FALLBACK_CHARS = 60


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


class SentTurn(NamedTuple):
    question: Message
    reply: Message
    # What the reply answers, oldest first and ending with `question` (empty unless asked for).
    history: list[Message]


# A turn is saved by one statement: it checks that no reply of the conversation is still open
# and that the user is within the rate limit, inserts the message and its pending reply, moves
# the conversation to the top of the list and reads the history the reply answers. All its
# parts see the database as the statement began; two sends racing in one conversation are
# settled by the one_open_reply constraint, which fails the later statement as a whole.
_SEND_SQL = """
WITH open_reply AS (
    SELECT id, created_at FROM chat_message
    WHERE conversation_id = %(conversation)s AND role = 'assistant'
      AND status IN ('pending', 'streaming')
), limiting AS (
    -- The limit-th newest turn of the user's last minute: until it is a minute old, one more
    -- turn would be one too many. A send moves its conversation's updated_at, so only
    -- conversations updated in that minute can hold one: conv_owner_recent finds those few and
    -- msg_conv_time their new messages, however many conversations the user has.
    SELECT m.created_at FROM chat_message m JOIN chat_conversation c ON c.id = m.conversation_id
    WHERE %(limit)s > 0 AND c.owner_id = %(owner)s AND c.updated_at >= %(since)s
      AND m.role = 'user' AND m.created_at >= %(since)s
    ORDER BY m.created_at DESC OFFSET greatest(%(limit)s - 1, 0) LIMIT 1
), allowed AS (
    SELECT NOT EXISTS (SELECT FROM open_reply) AND NOT EXISTS (SELECT FROM limiting) AS ok
), question AS (
    -- None for a regenerated answer. A new message follows the branch shown (msg_conv_active
    -- finds its last message); an edited one takes the place of the one it replaces.
    INSERT INTO chat_message (conversation_id, role, content, status, model, error, trace,
                              created_at, parent_id)
    SELECT %(conversation)s, 'user', %(content)s::text, 'complete', '', '', '{}', %(now)s,
           CASE WHEN %(cut)s::bigint IS NULL
                THEN (SELECT id FROM chat_message WHERE conversation_id = %(conversation)s
                      AND active ORDER BY id DESC LIMIT 1)
                ELSE %(parent)s::bigint END
    FROM allowed WHERE ok AND %(content)s::text IS NOT NULL
    RETURNING id
), reply AS (
    INSERT INTO chat_message (conversation_id, role, content, status, model, error, trace,
                              created_at, reply_to_id, parent_id)
    SELECT %(conversation)s, 'assistant', '', 'pending', '', '', '{}', %(now)s,
           coalesce(q.id, %(reply_to)s::bigint), coalesce(q.id, %(parent)s::bigint)
    FROM allowed LEFT JOIN question q ON true
    WHERE ok AND (q.id IS NOT NULL OR %(content)s::text IS NULL)
    RETURNING id
), retired AS (
    -- An edit or a regeneration: the message replaced and the rest of its branch leave it.
    UPDATE chat_message SET active = false
    WHERE %(cut)s::bigint IS NOT NULL AND conversation_id = %(conversation)s AND active
      AND id >= %(cut)s::bigint AND EXISTS (SELECT FROM reply)
), touched AS (
    UPDATE chat_conversation SET updated_at = %(now)s
    WHERE id = %(conversation)s AND EXISTS (SELECT FROM reply)
), earlier AS (
    -- As history_before: the usable messages of the branch before the new one, newest first.
    SELECT id, role, content, status, created_at FROM chat_message
    WHERE conversation_id = %(conversation)s AND active
      AND (%(cut)s::bigint IS NULL OR id < %(cut)s::bigint)
      AND status <> 'failed' AND content <> ''
    ORDER BY id DESC LIMIT %(earlier)s
), usable AS (
    SELECT count(*) AS n FROM chat_message
    WHERE %(earlier)s > 0 AND conversation_id = %(conversation)s AND active
      AND (%(cut)s::bigint IS NULL OR id < %(cut)s::bigint)
      AND status <> 'failed' AND content <> ''
)
SELECT (SELECT json_build_array(id, created_at) FROM open_reply LIMIT 1),
       (SELECT created_at FROM limiting),
       (SELECT id FROM question), (SELECT id FROM reply),
       (SELECT coalesce(json_agg(json_build_array(id, role, content, status, created_at)
                                 ORDER BY id), '[]') FROM earlier),
       (SELECT n FROM usable)
"""
_ONE_OPEN_REPLY = "chat_one_open_reply"
_BUSY = "Wait for the current answer to finish, or stop it."


def message_send(
    *,
    conversation: Conversation,
    content: str,
    config: RuntimeConfig | None = None,
    history: int = 0,
    refusal: Callable[[str], str] | None = None,
    replacing: Message | None = None,
) -> SentTurn:
    """Save the user's message and an empty reply to fill, before any LLM call.

    With `history`, also read the last that many messages the reply answers (as
    `turn_history` would), in the same statement. `refusal` says why a message within the size
    limit cannot be sent ("" if it can): the chat model has no room for it. `replacing` is the
    user's message this one edits: the new one starts a branch beside it, and the old one with
    the rest of its branch leaves the branch shown.
    """
    if replacing is not None and (
        replacing.role != Message.Role.USER or replacing.conversation_id != conversation.pk
    ):
        raise ChatError("Only your own messages can be edited.")
    # Browsers submit a form's newlines as CRLF but count them as one character for the box's
    # maxlength; a message is stored with plain newlines.
    content = content.replace("\r\n", "\n").strip()
    if not content:
        raise ChatError("Type a message first.")
    config = config or runtime_config()
    if len(content) > config.max_message_chars:
        raise ChatError(
            f"Your message is {len(content):,} characters long; "
            f"the limit is {config.max_message_chars:,}."
        )
    if refusal is not None and (why := refusal(content)):
        raise ChatError(why)
    now = timezone.now()
    params = {
        "conversation": conversation.pk,
        "owner": conversation.owner_id,
        "content": content,
        "now": now,
        "since": now - TURN_RATE_WINDOW,
        "limit": config.turns_per_minute,
        "earlier": max(history - 1, 0),
        "cut": replacing.pk if replacing is not None else None,
        "parent": replacing.parent_id if replacing is not None else None,
        "reply_to": None,
    }
    question_id, reply_id, earlier, usable = _open_turn(params, limit=config.turns_per_minute)
    question = _saved(
        id=question_id,
        conversation=conversation,
        role=Message.Role.USER,
        content=content,
        created_at=now,
    )
    if replacing is None:
        # A new message has no other version: the page shows it without reading its siblings
        # (selectors.branch_place), as it is rendered on the event loop.
        question.branch_count, question.branch_index = 1, 1
        question.branch_previous = question.branch_next = None
    reply = _saved(
        id=reply_id,
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.PENDING,
        reply_to_id=question_id,
        parent_id=question_id,
        created_at=now,
    )
    previous = [
        _saved(
            id=pk,
            conversation=conversation,
            role=role,
            content=text,
            status=status,
            created_at=datetime.fromisoformat(created),
        )
        for pk, role, text, status, created in json_value(earlier)
    ]
    if history:
        # The window moves on in steps (history_kept), as history_before's does.
        previous = previous[len(previous) + 1 - history_kept(total=usable + 1, window=history) :]
    reply_lease_renew(reply_id=reply.pk)
    turn_record(user_id=conversation.owner_id, reply_id=reply.pk, now=now)
    return SentTurn(question, reply, previous + [question] if history else [])


def message_regenerate(*, message: Message, config: RuntimeConfig | None = None) -> Message:
    """Open a new answer beside a finished one: the model answers the branch up to the message
    the old answer follows, and the old answer with the rest of its branch leaves the branch
    shown (it stays a branch to switch back to)."""
    if message.role != Message.Role.ASSISTANT or message.is_open or message.parent_id is None:
        raise ChatError("Only a finished answer can be regenerated.")
    config = config or runtime_config()
    now = timezone.now()
    params = {
        "conversation": message.conversation_id,
        "owner": message.conversation.owner_id,
        "content": None,
        "now": now,
        "since": now - TURN_RATE_WINDOW,
        "limit": config.turns_per_minute,
        "earlier": 0,
        "cut": message.pk,
        "parent": message.parent_id,
        "reply_to": message.reply_to_id,
    }
    _, reply_id, _, _ = _open_turn(params, limit=config.turns_per_minute)
    reply = _saved(
        id=reply_id,
        conversation=message.conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.PENDING,
        reply_to_id=message.reply_to_id,
        parent_id=message.parent_id,
        created_at=now,
    )
    reply_lease_renew(reply_id=reply.pk)
    turn_record(user_id=message.conversation.owner_id, reply_id=reply.pk, now=now)
    return reply


def _open_turn(params: dict, *, limit: int) -> tuple:
    """Run the send statement: (question id, reply id, earlier messages, usable count), or
    refuse as busy or too fast."""
    busy, limiting, question_id, reply_id, earlier, usable = _send_statement(params)
    if busy:
        # The open reply may be one a process that died left behind: then it goes, and the
        # statement runs again.
        busy_id, busy_since = json_value(busy)
        if message_fail_if_orphaned(
            reply_id=busy_id, created_at=datetime.fromisoformat(busy_since)
        ):
            busy, limiting, question_id, reply_id, earlier, usable = _send_statement(params)
        if busy:
            raise ChatError(_BUSY)
    if reply_id is None:
        raise too_fast(limiting=limiting, limit=limit, now=params["now"])
    return question_id, reply_id, earlier, usable


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
        raise ChatError(_BUSY)
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
        raise ChatError(_BUSY)
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


@contextmanager
def _busy_on_conflict():
    """A reply opened by a racing send or retry, caught by the constraint, is refused as busy."""
    try:
        yield
    except IntegrityError as exc:
        if getattr(getattr(exc.__cause__, "diag", None), "constraint_name", "") == _ONE_OPEN_REPLY:
            raise ChatError(_BUSY) from exc
        raise


def _send_statement(params: dict) -> tuple:
    # A transaction of its own, or a savepoint inside the caller's, so that a refusal never
    # spoils an enclosing transaction.
    with _busy_on_conflict(), transaction.atomic():
        return fetch_hot(_SEND_SQL, params)[0]


def _saved(**fields) -> Message:
    """A Message for a row the send statement wrote or read, as if loaded from the database."""
    message = Message(**fields)
    message._state.adding = False
    message._state.db = DEFAULT_DB_ALIAS
    return message


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


@transaction.atomic
def message_retry(*, message: Message) -> Message:
    if message.role != Message.Role.ASSISTANT or message.status not in {
        Message.Status.FAILED,
        Message.Status.CANCELLED,
    }:
        raise ChatError("Only a failed or stopped answer can be retried.")
    # One reply streams at a time in a conversation, as for a new message.
    Conversation.objects.filter(pk=message.conversation_id).update(updated_at=timezone.now())
    if live_open_reply(conversation=message.conversation) is not None:
        raise ChatError(_BUSY)
    message.content = ""
    message.error = ""
    message.finish_reason = ""
    message.status = Message.Status.PENDING
    message.trace = {}
    message.ttft_ms = message.latency_ms = None
    message.prompt_tokens = message.completion_tokens = None
    reply_lease_renew(reply_id=message.pk)
    with _busy_on_conflict(), transaction.atomic():
        message.save()
    return message


@transaction.atomic
def message_continue(*, message: Message) -> Message:
    """Open an answer cut short (at its cap, in a loop, or broken off) to be written on: it is
    generated again from where its text stops, and that text is kept whatever happens."""
    if not message.can_continue:
        raise ChatError("Only an answer that was cut short can be continued.")
    Conversation.objects.filter(pk=message.conversation_id).update(updated_at=timezone.now())
    if live_open_reply(conversation=message.conversation) is not None:
        raise ChatError(_BUSY)
    message.error = ""
    message.finish_reason = ""
    message.status = Message.Status.PENDING
    reply_lease_renew(reply_id=message.pk)
    with _busy_on_conflict(), transaction.atomic():
        message.save(update_fields=["error", "finish_reason", "status"])
    return message


def message_cancel_open(*, reply_id: int) -> None:
    """A reply stopped before anything was generated: cancelled, with no text."""
    _close_if_open(reply_id, status=Message.Status.CANCELLED)


def message_fail_open(*, reply_id: int, error: str, trace: dict | None = None) -> Message | None:
    """A reply that could not be asked for (its prompt cannot fit): failed, with the reason."""
    if not _close_if_open(reply_id, status=Message.Status.FAILED, error=error, trace=trace or {}):
        return None
    return Message.objects.get(pk=reply_id)


@transaction.atomic
def message_withdraw(*, message: Message) -> str:
    """Take back a turn whose answer failed, to edit its message: the failed reply and the
    message it answers are deleted; the message's text is returned for the composer."""
    if message.role != Message.Role.ASSISTANT or message.status != Message.Status.FAILED:
        raise ChatError("Only the message of a failed answer can be edited.")
    # The composer it goes back into is Stop's while another answer is written.
    if live_open_reply(conversation=message.conversation) is not None:
        raise ChatError(_BUSY)
    question = Message.objects.filter(pk=message.reply_to_id).first()
    Message.objects.filter(pk__in=[message.pk, message.reply_to_id]).delete()
    return question.content if question is not None else ""


def message_start_streaming(*, message: Message, model: str, trace: dict) -> None:
    Message.objects.filter(pk=message.pk).update(
        status=Message.Status.STREAMING, model=model, trace=trace
    )
    # The finished reply is pushed from this instance: its status line names the model.
    message.model = model


def message_finish(
    *,
    message: Message,
    status: str,
    content: str,
    error: str = "",
    finish_reason: str = "",
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    ttft_ms: float | None = None,
    latency_ms: float | None = None,
    trace: dict | None = None,
    background: bool = True,
) -> Message:
    """Save a reply's outcome and, with `background`, queue the work it starts (see
    `message_queue_background`); the chat defers that until the user has the reply."""
    message.status = status
    message.content = content
    message.error = error
    message.finish_reason = finish_reason
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
            "finish_reason",
            "prompt_tokens",
            "completion_tokens",
            "ttft_ms",
            "latency_ms",
            "trace",
        ]
    )
    Conversation.objects.filter(pk=message.conversation_id).update(updated_at=timezone.now())
    if background:
        message_queue_background(message=message)
    return message


def message_queue_background(*, message: Message, learn: bool = True) -> None:
    """Queue what a complete reply starts: its conversation's title, and reflection on it
    unless the turn was not to `learn` (memory off for that call).

    Memories form in the background, from sync code and only once the reply is saved (and the
    conversation has gone quiet: cognition's reflection_timing). Each
    task is a broker round trip of a few milliseconds. Both tasks call the LLM, a layer above
    conversations, so they are sent by name.
    """
    if message.status != Message.Status.COMPLETE:
        return
    conversation = (
        Conversation.objects.filter(pk=message.conversation_id)
        .values("title", "temporary", "owner_id")
        .first()
    )
    if conversation is None:
        return
    if not conversation["title"]:
        task_send_on_commit("apps.chat.tasks.title_conversation", message.conversation_id)
    # A call with memory off, a temporary chat, or a user who turned memory off, teaches the
    # memory nothing.
    if not learn or conversation["temporary"]:
        return
    if not memory_enabled_for(user_id=conversation["owner_id"]):
        return
    # Reflection waits for the conversation to go quiet, then takes its turns in one call.
    task_send_on_commit(
        "cognition.reflect_when_quiet",
        message.conversation_id,
        message.pk,
        countdown=runtime_config().reflection_quiet_seconds,
    )


# Where a sentence of the user's ends: ".", "!", "?" or "…" before a space.
_SENTENCE_END = re.compile(r"[.!?…](?=\s)")


def fallback_title(text: str) -> str:
    """The user's first words, when the model gives no title: their first line as they wrote
    it, punctuation kept; longer than TITLE_FALLBACK_CHARS, it ends with the last sentence that
    fits ("Hi! My name is Laura."), or else at the last word that fits, with an ellipsis."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    line = " ".join(line.split())
    if len(line) <= TITLE_FALLBACK_CHARS:
        return line
    head = line[: TITLE_FALLBACK_CHARS + 1]
    ends = [match.end() for match in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= TITLE_FALLBACK_CHARS // 3:
        return head[: ends[-1]]
    cut = head.rsplit(" ", 1)[0] if " " in head else line[:TITLE_FALLBACK_CHARS]
    return cut.rstrip(",;:-–— ") + "…"


def conversation_set_title_if_empty(*, conversation_id: int, title: str) -> bool:
    title = title.strip().strip("\"'").strip()[:200]
    if not title:
        return False
    return bool(Conversation.objects.filter(pk=conversation_id, title="").update(title=title))


# ------------------------------------------------------------------ work on a reply, in its trace
#
# Work done on a reply after it is saved (reflection) claims the reply and records its outcome
# under a key of the reply's trace. Each is one statement, so it commits with the caller's
# transaction: a task that dies before the commit leaves no claim behind.

_TRACE_CLAIM_SQL = """
UPDATE chat_message SET trace = trace || jsonb_build_object(%s::text, %s::jsonb)
 WHERE id = %s AND NOT jsonb_exists(trace, %s)
"""
_TRACE_PUT_SQL = (
    "UPDATE chat_message SET trace = trace || jsonb_build_object(%s::text, %s::jsonb) WHERE id = %s"
)


def message_trace_claim(*, message_id: int, key: str, value: dict) -> bool:
    """Set `key` of the message's trace to `value` unless the trace has it; False when another
    run already claimed it, so work claimed this way is done once per message."""
    with connection.cursor() as cursor:
        cursor.execute(_TRACE_CLAIM_SQL, [key, json.dumps(value), message_id, key])
        return cursor.rowcount == 1


def message_trace_put(*, message_id: int, key: str, value: dict) -> None:
    """Set `key` of the message's trace to `value`, keeping its other keys."""
    with connection.cursor() as cursor:
        cursor.execute(_TRACE_PUT_SQL, [key, json.dumps(value), message_id])


# ------------------------------------------------------------------ what memory forgets
#
# An answer's trace lists the memories, episodes and triples it used (under "memory"), the
# note its message was sent with (under "note", which quotes them), the memories reflection
# wrote from its turn with the quotes it rejected (under "reflection"), and what may paraphrase
# any memory: the retrieval plan's steps (under "memory", "plan") and the internal debate's
# draft and review (under "debate"). Once memory forgets them, the traces must not keep their
# text. Memory calls these inside its own forgetting transaction.

# Each lateral step takes the trace the step before left: the lists without the forgotten ids,
# the note dropped if it quotes one, the reflection's rejected quotes if it wrote one, then
# the plan's steps and the debate's draft and review, from every trace of the owners
# (`everywhere`) or from those quoting one of `quoting` whole.
_TRACES_FORGET_SQL = """
WITH scrubbed AS (
    SELECT m.id, m.trace AS before, debated.trace AS after
      FROM chat_message AS m
      JOIN chat_conversation AS c ON c.id = m.conversation_id
     CROSS JOIN LATERAL (
         SELECT jsonb_set(jsonb_set(jsonb_set(m.trace,
                    '{memory,memories}', jsonb_path_query_array(
                        m.trace, '$.memory.memories[*] ? (!(@.id == $memories[*]))', %(ids)s::jsonb
                    ), false),
                    '{memory,triples}', jsonb_path_query_array(
                        m.trace, '$.memory.triples[*] ? (!(@.id == $triples[*]))', %(ids)s::jsonb
                    ), false),
                    '{memory,episodes}', jsonb_path_query_array(
                        m.trace, '$.memory.episodes[*] ? (!(@.id == $episodes[*]))', %(ids)s::jsonb
                    ), false) AS trace
     ) AS listed
     CROSS JOIN LATERAL (
         SELECT CASE WHEN jsonb_path_exists(listed.trace, '$.note ? (@.memories[*] == $memories[*]
                              || @.triples[*] == $triples[*] || @.episodes[*] == $episodes[*])',
                              %(ids)s::jsonb)
                     THEN listed.trace - 'note'
                     ELSE listed.trace
                END AS trace
     ) AS noted
     CROSS JOIN LATERAL (
         SELECT CASE WHEN jsonb_path_exists(noted.trace, '$.reflection ? (
                              @.created[*] == $memories[*] || @.updated[*] == $memories[*]
                              || @.left[*] == $memories[*] || @.quarantined[*] == $memories[*])',
                              %(ids)s::jsonb)
                     THEN jsonb_set(noted.trace, '{reflection,rejected}', '[]', false)
                     ELSE noted.trace
                END AS trace
     ) AS reflected
     CROSS JOIN LATERAL (
         SELECT CASE WHEN %(everywhere)s OR EXISTS (
                         SELECT 1 FROM unnest(%(quoting)s::text[]) AS quoted(text)
                          WHERE strpos(lower((reflected.trace #> '{memory,plan,steps}')::text),
                                       lower(btrim(to_jsonb(quoted.text)::text, '"'))) > 0)
                     THEN jsonb_set(reflected.trace, '{memory,plan,steps}', '[]', false)
                     ELSE reflected.trace
                END AS trace
     ) AS planned
     CROSS JOIN LATERAL (
         SELECT CASE WHEN %(everywhere)s OR EXISTS (
                         SELECT 1 FROM unnest(%(quoting)s::text[]) AS quoted(text)
                          WHERE strpos(lower((planned.trace -> 'debate')::text),
                                       lower(btrim(to_jsonb(quoted.text)::text, '"'))) > 0)
                     THEN planned.trace #- '{debate,draft}' #- '{debate,review}'
                     ELSE planned.trace
                END AS trace
     ) AS debated
     WHERE c.owner_id = ANY(%(owners)s::bigint[])
       AND m.trace ?| array['memory', 'note', 'reflection', 'debate']
)
UPDATE chat_message AS m
   SET trace = s.after
  FROM scrubbed AS s
 WHERE s.id = m.id AND s.after <> s.before
"""

_TRACES_FORGET_ALL_MEMORIES_SQL = """
WITH scrubbed AS (
    SELECT m.id, m.trace AS before,
           jsonb_set(jsonb_set(jsonb_set(jsonb_set(jsonb_set(jsonb_set(
               m.trace, '{memory,memories}', '[]', false),
               '{memory,episodes}', '[]', false),
               '{memory,triples}', '[]', false),
               '{memory,plan,steps}', '[]', false),
               '{reflection,rejected}', '[]', false),
               '{reflection,proposed}', '[]', false)
           - 'note' #- '{debate,draft}' #- '{debate,review}' AS after
      FROM chat_message AS m
      JOIN chat_conversation AS c ON c.id = m.conversation_id
     WHERE c.owner_id = %s
       AND m.trace ?| array['memory', 'note', 'reflection', 'debate']
)
UPDATE chat_message AS m
   SET trace = s.after
  FROM scrubbed AS s
 WHERE s.id = m.id AND s.after <> s.before
"""


def message_traces_forget(
    *,
    owner_ids: Sequence[int],
    memory_ids: Sequence[int] = (),
    triple_ids: Sequence[int] = (),
    episode_ids: Sequence[int] = (),
    quoting: Sequence[str] | None = None,
) -> int:
    """Take these memories, triples and episodes out of their owners' answers' traces, with the
    notes quoting them, in one statement; how many traces changed.

    What may paraphrase them (plan steps, debate drafts and reviews) goes from every trace of
    the owners, a person's forgetting; given `quoting` (decay's), only from the traces quoting
    one of these texts whole.
    """
    ids = {"memories": list(memory_ids), "triples": list(triple_ids), "episodes": list(episode_ids)}
    with connection.cursor() as cursor:
        cursor.execute(
            _TRACES_FORGET_SQL,
            {
                "ids": json.dumps(ids),
                "owners": list(owner_ids),
                "everywhere": quoting is None,
                "quoting": list(quoting or []),
            },
        )
        return cursor.rowcount


def message_traces_forget_all_memories(*, owner_id: int) -> int:
    """Empty what one person's answers' traces quote of memory (the memories, episodes and
    triples used, the note, the memories reflection rejected or proposed) or may paraphrase
    (plan steps, debate drafts and reviews), in one statement; how many traces changed. The
    answers themselves stay."""
    with connection.cursor() as cursor:
        cursor.execute(_TRACES_FORGET_ALL_MEMORIES_SQL, [owner_id])
        return cursor.rowcount
