"""The chat first, then the rest.

A local server answers few requests at a time (llama.cpp's slots, Ollama's parallel requests),
so a reflection running when the user sends a message could hold the answer back for as long as
it generates. While an answer (or another call the user waits for) streams from an endpoint, it
is marked active in Redis, and so is each background call generating there. A background call
runs while the server has room for it: no answer streams, or the answers and the background
calls (itself counted) leave a slot free for the next answer. Without room it waits (bounded).
One already generating is preempted the moment the room is gone: it closes its stream, which
makes the server stop and free the slot, and raises `Preempted`. Its task is queued again, with
the count of its preemptions, to run once the user has been quiet (`again_when_preempted`);
what it wrote before (a reflection's replies, a critic's verdicts, an episode's parts) stays
done. Only a user's message preempts, so a task is queued again at most once per message.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Iterator

from django.core.cache import cache

from apps.core.cache import redis_client
from apps.core.llm.outcomes import Preempted
from apps.core.selectors import runtime_config

logger = logging.getLogger(__name__)

CHAT_ACTIVE_SECONDS = 120
POLL_SECONDS = 0.2
# How often a generating background call looks for an answer to give way to: the answer's first
# token waits this long at most, on top of the server freeing its slot.
GIVE_WAY_CHECK_SECONDS = 0.05


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


@contextlib.contextmanager
def again_when_preempted(task, *, preempted: int) -> Iterator[None]:
    """Run a bound Celery task's body; when its LLM call is preempted, queue the task again with
    the same arguments and `preempted` + 1, to start once the conversation has been quiet for
    `reflection_quiet_seconds` (then it still waits while an answer streams). The task takes a
    `preempted` keyword argument and is safe to run twice, as every LLM task is."""
    try:
        yield
    except Preempted as exc:
        countdown = runtime_config().reflection_quiet_seconds
        logger.info(
            "%s gave the LLM's slot to the chat (%d tokens in, preempted %d times); again in %d s",
            task.name,
            exc.generated,
            preempted + 1,
            countdown,
        )
        task.apply_async(
            args=task.request.args,
            kwargs={**(task.request.kwargs or {}), "preempted": preempted + 1},
            countdown=countdown,
        )
