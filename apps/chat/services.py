"""A turn's messages from send to finish: the user's message saved with its reply to fill (or a
reply regenerated, retried or continued), the reply streamed and finished, the background work
it starts, and that work's claims in the reply's trace."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, transaction
from django.utils import timezone

from apps.accounts.selectors import memory_enabled_for
from apps.chat.admission import TURN_RATE_WINDOW, too_fast, turn_record
from apps.chat.errors import ChatError
from apps.chat.models import Conversation, Message
from apps.chat.open_replies import (
    BUSY,
    busy_on_conflict,
    live_open_reply,
    message_fail_if_orphaned,
    reply_lease_renew,
)
from apps.chat.selectors import history_kept
from apps.core.db import fetch_hot, json_value
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config
from apps.core.services import task_send_on_commit
from apps.language.text import visible


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
    -- As history_before: the usable messages of the branch before the new one, newest first;
    -- whether each came by an import (its trace's "imported": data in the prompt).
    SELECT id, role, content, status, created_at, trace ? 'imported' AS imported
      FROM chat_message
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
       (SELECT coalesce(json_agg(json_build_array(id, role, content, status, created_at,
                                                  imported) ORDER BY id), '[]') FROM earlier),
       (SELECT n FROM usable)
"""


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
    # maxlength; a message is stored with plain newlines, and without what no reader sees.
    content = visible(content).strip()
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
    earlier = json_value(earlier)
    if history:
        # The window moves on in steps (history_kept), as history_before's does; a message
        # outside it is not made.
        earlier = earlier[len(earlier) + 1 - history_kept(total=usable + 1, window=history) :]
    previous = [
        _saved(
            id=pk,
            conversation=conversation,
            role=role,
            content=text,
            status=status,
            created_at=datetime.fromisoformat(created),
            trace={"imported": True} if imported else {},
        )
        for pk, role, text, status, created, imported in earlier
    ]
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
            raise ChatError(BUSY)
    if reply_id is None:
        raise too_fast(limiting=limiting, limit=limit, now=params["now"])
    return question_id, reply_id, earlier, usable


def _send_statement(params: dict) -> tuple:
    # One statement is a transaction of its own; inside the caller's it gets a savepoint, so
    # that a refusal never spoils the enclosing transaction. The savepoint functions do nothing
    # outside a transaction, where atomic() would cost two round trips (BEGIN, COMMIT) before
    # the answer can be asked for.
    with busy_on_conflict():
        savepoint = transaction.savepoint()
        try:
            row = fetch_hot(_SEND_SQL, params, prepare=True)[0]
        except DatabaseError:
            transaction.savepoint_rollback(savepoint)
            raise
        transaction.savepoint_commit(savepoint)
        return row


def _saved(**fields) -> Message:
    """A Message for a row the send statement wrote or read, as if loaded from the database."""
    message = Message(**fields)
    message._state.adding = False
    message._state.db = DEFAULT_DB_ALIAS
    return message


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
        raise ChatError(BUSY)
    message.content = ""
    message.error = ""
    message.finish_reason = ""
    message.status = Message.Status.PENDING
    message.trace = {}
    message.ttft_ms = message.latency_ms = None
    message.prompt_tokens = message.completion_tokens = None
    reply_lease_renew(reply_id=message.pk)
    with busy_on_conflict(), transaction.atomic():
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
        raise ChatError(BUSY)
    message.error = ""
    message.finish_reason = ""
    message.status = Message.Status.PENDING
    reply_lease_renew(reply_id=message.pk)
    with busy_on_conflict(), transaction.atomic():
        message.save(update_fields=["error", "finish_reason", "status"])
    return message


@transaction.atomic
def message_withdraw(*, message: Message) -> str:
    """Take back a turn whose answer failed, to edit its message: the failed reply and the
    message it answers are deleted; the message's text is returned for the composer."""
    if message.role != Message.Role.ASSISTANT or message.status != Message.Status.FAILED:
        raise ChatError("Only the message of a failed answer can be edited.")
    # The composer it goes back into is Stop's while another answer is written.
    if live_open_reply(conversation=message.conversation) is not None:
        raise ChatError(BUSY)
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

    Memories form in the background, from sync code and only once the reply is saved and the
    conversation has gone quiet (cognition's reflection_timing); the title waits for the same
    quiet. Each task is a broker round trip of a few milliseconds. Both tasks call the LLM, a
    layer above conversations, so they are sent by name.
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
    quiet = runtime_config().reflection_quiet_seconds
    if not conversation["title"]:
        # Named once the conversation is quiet (chat.tasks.title_conversation).
        task_send_on_commit(
            "apps.chat.tasks.title_conversation",
            message.conversation_id,
            message.pk,
            countdown=quiet,
        )
    # A call with memory off, a temporary chat, or a user who turned memory off, teaches the
    # memory nothing.
    if not learn or conversation["temporary"]:
        return
    if not memory_enabled_for(user_id=conversation["owner_id"]):
        return
    if message.trace.get("world_queued"):
        # The turn changes the user's world state: after its answer, not before.
        task_send_on_commit("cognition.change_world", message.pk)
    # Reflection waits for the conversation to go quiet, then takes its turns in one call.
    task_send_on_commit(
        "cognition.reflect_when_quiet",
        message.conversation_id,
        message.pk,
        countdown=quiet,
    )


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


def message_trace_release(*, message_id: int, key: str) -> None:
    """Remove `key` from the message's trace: a claimed run that will be asked again."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE chat_message SET trace = trace - %s WHERE id = %s", [key, message_id]
        )


def message_trace_put(*, message_id: int, key: str, value: dict) -> None:
    """Set `key` of the message's trace to `value`, keeping its other keys."""
    with connection.cursor() as cursor:
        cursor.execute(_TRACE_PUT_SQL, [key, json.dumps(value), message_id])
