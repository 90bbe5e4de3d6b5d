"""The chat first, then the rest.

A local server answers few requests at a time (llama.cpp's slots, Ollama's model runner), so a
reflection running when the user sends a message would hold the answer back for as long as it
generates. While an answer streams from an endpoint, it is marked active in Redis; a background
call to the same endpoint waits for it (bounded), and one that is already generating gives way:
it closes its stream, which frees the server's slot at once, and asks again when the answer is
done.
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


def _active_key(base_url: str) -> str:
    digest = hashlib.sha1(base_url.encode()).hexdigest()[:16]
    return cache.make_key(f"llm:chat-active:{digest}")


def chat_active_mark(*, base_url: str, call_id: str) -> None:
    """The answer `call_id` is (still) generating at `base_url`; renewed while it runs."""
    with _redis_outage_logged("marking"):
        redis_client().zadd(_active_key(base_url), {call_id: time.time() + CHAT_ACTIVE_SECONDS})


def chat_active_clear(*, base_url: str, call_id: str) -> None:
    with _redis_outage_logged("clearing"):
        redis_client().zrem(_active_key(base_url), call_id)


@contextlib.contextmanager
def _redis_outage_logged(doing: str):
    # The mark only makes background calls wait, and lapses by itself: while Redis restarts,
    # the answer goes on and is saved without it.
    from redis.exceptions import RedisError

    try:
        yield
    except (RedisError, OSError) as exc:
        logger.warning("%s the active chat mark failed: %s", doing, exc)


def chat_active(base_url: str) -> bool:
    return redis_client().zcount(_active_key(base_url), time.time(), "+inf") > 0


def wait_for_chat(base_url: str, *, until: float) -> float:
    """Wait while an answer streams from `base_url`, until the monotonic time `until`."""
    started = time.monotonic()
    while time.monotonic() < until and chat_active(base_url):
        time.sleep(POLL_SECONDS)
    return time.monotonic() - started
