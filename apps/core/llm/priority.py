"""The chat first, then the rest.

A local server answers few requests at a time (llama.cpp's slots, Ollama's parallel requests),
so a reflection running when the user sends a message could hold the answer back for as long as
it generates. While an answer streams from an endpoint, it is marked active in Redis, and so is
each background call generating there. A background call runs while the server has room for
it: no answer streams, or the answers and the background calls (itself counted) leave a slot
free for the next answer. Without room it waits (bounded), and one already generating gives
way: it closes its stream, which frees the server's slot at once, and asks again when there is
room. A call gives way at most `MAX_GIVE_WAYS` times; then it waits for room and runs to its
end, so a user who keeps chatting delays a reflection but never has it start over forever.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time

from django.core.cache import cache

from apps.core.cache import redis_client

logger = logging.getLogger(__name__)

CHAT_ACTIVE_SECONDS = 120
POLL_SECONDS = 0.2
# How often a generating background call looks for an answer to give way to: the answer's first
# token waits this long at most, on top of the server freeing its slot.
GIVE_WAY_CHECK_SECONDS = 0.05
# Each give-way throws away the work done on the prompt so far (seconds of a CPU's time).
MAX_GIVE_WAYS = 2


def _key(kind: str, base_url: str) -> str:
    digest = hashlib.sha1(base_url.encode()).hexdigest()[:16]
    return cache.make_key(f"llm:{kind}:{digest}")


def _active_key(base_url: str) -> str:
    return _key("chat-active", base_url)


def _background_key(base_url: str) -> str:
    return _key("background-active", base_url)


def chat_active_mark(*, base_url: str, call_id: str) -> None:
    """The answer `call_id` is (still) generating at `base_url`; renewed while it runs."""
    with _redis_outage_logged("marking"):
        redis_client().zadd(_active_key(base_url), {call_id: time.time() + CHAT_ACTIVE_SECONDS})


def chat_active_clear(*, base_url: str, call_id: str) -> None:
    with _redis_outage_logged("clearing"):
        redis_client().zrem(_active_key(base_url), call_id)


def background_mark(*, base_url: str, call_id: str, seconds: float) -> None:
    """The background call `call_id` generates at `base_url`, for `seconds` at most (its time
    limit: a worker killed mid-call leaves a mark that lapses by itself)."""
    with _redis_outage_logged("marking"):
        redis_client().zadd(_background_key(base_url), {call_id: time.time() + seconds})


def background_clear(*, base_url: str, call_id: str) -> None:
    with _redis_outage_logged("clearing"):
        redis_client().zrem(_background_key(base_url), call_id)


@contextlib.contextmanager
def _redis_outage_logged(doing: str):
    # The marks only order background calls after the chat, and lapse by themselves: while
    # Redis restarts, the answer goes on and is saved without them.
    from redis.exceptions import RedisError

    try:
        yield
    except (RedisError, OSError) as exc:
        logger.warning("%s an active call mark failed: %s", doing, exc)


def room_for_background(base_url: str, *, slots: int, call_id: str) -> bool:
    """Whether the background call `call_id` may generate at `base_url` now: no answer streams
    from it, or the answers, the other background calls and this one leave one of its `slots`
    free for the next answer. With one slot: only while no answer streams."""
    now = time.time()
    pipe = redis_client().pipeline(transaction=False)
    pipe.zcount(_active_key(base_url), now, "+inf")
    pipe.zcount(_background_key(base_url), now, "+inf")
    pipe.zscore(_background_key(base_url), call_id)
    answers, background, own = pipe.execute()
    if not answers:
        return True
    others = background - (1 if own is not None and own >= now else 0)
    return answers + others + 1 < slots


def wait_for_room(base_url: str, *, slots: int, call_id: str, until: float) -> float:
    """Wait until the background call `call_id` has room at `base_url`, or the monotonic time
    `until`; the seconds waited."""
    started = time.monotonic()
    while time.monotonic() < until and not room_for_background(
        base_url, slots=slots, call_id=call_id
    ):
        time.sleep(POLL_SECONDS)
    return time.monotonic() - started
