"""When reflection runs: once a conversation goes quiet, or once enough of its turns wait.

Each completed reply queues a check `reflection_quiet_seconds` later (`reflection_due`). When
nothing was said in the conversation since, it reflects, in one call, on every reply of the
conversation not yet reflected on; when the user wrote again, the newer reply's own check
will. So a chat goes on without a reflection started, and given way, between each answer, and
a user who never pauses still has their turns reflected every `reflection_every_turns`.
A reflection that gave the server's slot to the chat (preempted) waits for the quiet: neither
its own run again nor that rule starts it between two messages, to give way again.
Replies that a lost task never reached (Redis restarted, a worker killed) are found by the
beat's sweep (`conversations_never_reflected`).
"""

from __future__ import annotations

from datetime import timedelta

from django.core.cache import cache
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.chat.open_replies import live_open_reply
from apps.cognition import reflection
from apps.core.models import RuntimeConfig

# A reply this old without a reflection lost its task: the quiet wait, a busy background
# queue and a reflection's retries are over by then.
SWEEP_AFTER = timedelta(minutes=10)
# Older ones are left alone: a conversation from before reflection was switched on is not
# learnt from all at once.
SWEEP_WITHIN = timedelta(days=1)


# The extraction's answer has room for the longest the schema allows, two quotes of up to 120
# characters per message (`schemas.stated_quotes_max_tokens`): six messages need 980 tokens,
# within the background calls' default cap of 1,024; eight would not be.
MAX_REPLIES_PER_CALL = 6


def replies_per_call(config: RuntimeConfig) -> int:
    """The most replies one reflection call takes: the turns that trigger it, and a couple that
    came while it waited in the queue, within what the extraction's answer holds. A longer
    backlog (the sweep's) takes more calls."""
    return min(config.reflection_every_turns + 2, MAX_REPLIES_PER_CALL)


# A turn with memory off for that call (an API client's choice, the user's setting then)
# teaches nothing; its reply is never reflected on, and never waits for it.
_MEMORY_OFF = {"memory": {"off": True}}


def replies_waiting(*, conversation_id: int, limit: int) -> list[int]:
    """The conversation's complete replies no reflection reached, oldest first, but those of
    turns with memory off and those an edit or a regeneration took off the branch shown (an
    edited message's old text teaches nothing)."""
    return list(
        Message.objects.filter(
            conversation_id=conversation_id,
            role=Message.Role.ASSISTANT,
            status=Message.Status.COMPLETE,
            active=True,
        )
        .exclude(trace__has_key=reflection.TRACE_KEY)
        .exclude(trace__contains=_MEMORY_OFF)
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)[:limit]
    )


def reflection_due(*, conversation_id: int, reply_id: int, config: RuntimeConfig) -> bool:
    """Whether the conversation of `reply_id` is due its reflection now: nothing was said in
    it since that reply, or `reflection_every_turns` of its replies wait for one (unless its
    reflection gave way to the chat since the last one)."""
    if not Message.objects.filter(conversation_id=conversation_id, pk__gt=reply_id).exists():
        return True
    if cache.get(_gave_way_key(conversation_id)):
        return False
    waiting = replies_waiting(conversation_id=conversation_id, limit=config.reflection_every_turns)
    return len(waiting) >= config.reflection_every_turns


def conversation_quiet(*, conversation_id: int, seconds: int) -> bool:
    """Whether nothing was sent or answered in the conversation for `seconds` (a send and a
    reply's end move its updated_at) and no reply is being written (one a dead process left
    open is failed, as a page looking at it would)."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        return True
    if conversation.updated_at > timezone.now() - timedelta(seconds=seconds):
        return False
    return live_open_reply(conversation=conversation) is None


def _gave_way_key(conversation_id: int) -> str:
    return f"cognition:reflection-gave-way:{conversation_id}"


def reflection_gave_way(*, conversation_id: int) -> None:
    """The conversation's reflection gave the server to the chat: it waits for the quiet
    until one is done (at most SWEEP_AFTER, the sweep's wait)."""
    cache.set(_gave_way_key(conversation_id), True, SWEEP_AFTER.total_seconds())


def reflection_done(*, conversation_id: int) -> None:
    cache.delete(_gave_way_key(conversation_id))


def conversations_never_reflected(*, limit: int) -> list[int]:
    """Conversations quiet for SWEEP_AFTER (within SWEEP_WITHIN) with a complete reply no
    reflection reached, that teach memory: not temporary, memory on for the turn and for its
    owner (`memory_enabled_for`). At most `limit`, the most recent first."""
    now = timezone.now()
    rows = (
        Message.objects.filter(
            conversation__updated_at__gte=now - SWEEP_WITHIN,
            conversation__updated_at__lte=now - SWEEP_AFTER,
            conversation__temporary=False,
            role=Message.Role.ASSISTANT,
            status=Message.Status.COMPLETE,
            active=True,
        )
        .exclude(trace__has_key=reflection.TRACE_KEY)
        .exclude(trace__contains=_MEMORY_OFF)
        .exclude(conversation__owner__thalamus_settings__memory_enabled=False)
        .values_list("conversation_id", "conversation__updated_at")
        .distinct()
        .order_by("-conversation__updated_at")[:limit]
    )
    return [conversation_id for conversation_id, _ in rows]
