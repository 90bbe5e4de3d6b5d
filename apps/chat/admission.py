"""Admission, before a turn starts: the turn rate and the stream slots, in Redis.

A refused message must start nothing: no embedding, no search, no LLM call. The send statement
(services.message_send) is the authority on the turn limit, but the socket starts the turn's
recall before it saves; so the socket first asks Redis, in one round trip, whether the user is
over the limit (a mirror of their recent turns, which message_send records) and for one of
their stream slots.
"""

from __future__ import annotations

import logging
import math
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from redis.exceptions import RedisError

from apps.chat.errors import ChatError, ChatRateLimited
from apps.core.cache import redis_client
from apps.core.models import RuntimeConfig

logger = logging.getLogger(__name__)

TURN_RATE_WINDOW = timedelta(minutes=1)
STREAM_SLOT_SECONDS = 900
STREAMS_BUSY = (
    "You already have {cap} answer{s} being written. Wait for one to finish, or stop one."
)
_ADMIT = """
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
local limit = tonumber(ARGV[3])
if limit > 0 then
  local recent = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  local count = #recent / 2
  if count >= limit then
    return {'rate', recent[(count - limit) * 2 + 2]}
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return {'streams', ''}
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[6])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return {'ok', ''}
"""


def too_fast(*, limiting: datetime, limit: int, now: datetime) -> ChatRateLimited:
    """The refusal of a turn while `limiting`, the limit-th newest turn, is under a window old."""
    retry_after = max(1, math.ceil((limiting + TURN_RATE_WINDOW - now).total_seconds()))
    return ChatRateLimited(
        f"You are sending messages too fast: at most {limit} per minute. "
        f"Try again in {retry_after} second{'' if retry_after == 1 else 's'}.",
        retry_after=retry_after,
    )


def _turns_key(user_id: int) -> str:
    return cache.make_key(f"chat:turns:{user_id}")


def _streams_key(user_id: int) -> str:
    return cache.make_key(f"chat:streams:{user_id}")


def _redis():
    return redis_client()


@contextmanager
def _redis_outage_logged(doing: str):
    # Admission is a fast path in front of the send statement, which still holds the turn
    # limit: while Redis is away, turns go on without a stream slot.
    try:
        yield
    except (RedisError, OSError) as exc:
        logger.warning("%s failed, Redis is unreachable: %s", doing, exc)


def turn_record(*, user_id: int, reply_id: int, now: datetime) -> None:
    """Mirror a saved turn in the user's recent turns, which `turn_admit` counts."""
    key = _turns_key(user_id)
    window = int(TURN_RATE_WINDOW.total_seconds())
    with _redis_outage_logged("recording a turn"):
        pipeline = _redis().pipeline().zadd(key, {str(reply_id): now.timestamp()})
        pipeline.expire(key, window).execute()


def turn_admit(*, user_id: int, config: RuntimeConfig, new_turn: bool = True) -> str:
    """Admit a turn of the user's before anything of it starts, and hold one of their stream
    slots (THALAMUS_STREAMS_PER_USER) for it; returns the slot, for `stream_slot_release`.

    Raises ChatRateLimited when their recent turns already reach `turns_per_minute` (unless it
    is not a `new_turn`: a Retry or a Continue), ChatError when all their slots are taken. A
    slot left by a process that died frees itself after STREAM_SLOT_SECONDS. Without Redis the
    turn is admitted with no slot (""); the send statement still holds the turn limit.
    """
    slot = uuid.uuid4().hex
    now = timezone.now()
    try:
        outcome, limiting = _redis().eval(
            _ADMIT,
            2,
            _turns_key(user_id),
            _streams_key(user_id),
            now.timestamp(),
            TURN_RATE_WINDOW.total_seconds(),
            config.turns_per_minute if new_turn else 0,
            settings.THALAMUS_STREAMS_PER_USER,
            STREAM_SLOT_SECONDS,
            slot,
        )
    except (RedisError, OSError) as exc:
        logger.warning("admitting a turn without a stream slot, Redis is unreachable: %s", exc)
        return ""
    if outcome == b"rate":
        limiting = datetime.fromtimestamp(float(limiting), tz=now.tzinfo)
        raise too_fast(limiting=limiting, limit=config.turns_per_minute, now=now)
    if outcome == b"streams":
        cap = settings.THALAMUS_STREAMS_PER_USER
        raise ChatError(STREAMS_BUSY.format(cap=cap, s="" if cap == 1 else "s"))
    return slot


def stream_slot_release(*, user_id: int, slot: str) -> None:
    if slot:
        with _redis_outage_logged("releasing a stream slot"):
            _redis().zrem(_streams_key(user_id), slot)
