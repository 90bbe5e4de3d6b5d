"""Guessing API keys is throttled per client address, in Redis.

Each wrong key an address sends counts in a window that starts with its first one; at the
limit the address gets 429 with Retry-After for the rest of the window, whatever key it sends,
so a right guess cannot be told from a wrong one until then.
"""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache

from apps.core.cache import redis_client

BAD_KEY_WINDOW_SECONDS = 300


def _counter(address: str) -> str:
    return cache.make_key(f"api:bad-keys:{address}")


def _redis():
    return redis_client()


def bad_api_key_wait(*, address: str) -> int:
    """Seconds before an API key from `address` is looked at again; 0 if it may try now.

    Every call to /v1 asks this before its key is read, so the common answer takes one GET;
    only an address at the limit has its window's end read too."""
    client = _redis()
    counter = _counter(address)
    count = client.get(counter)
    if count is None or int(count) < settings.THALAMUS_API_BAD_KEY_LIMIT:
        return 0
    return max(int(client.ttl(counter)), 1)


def bad_api_key_record(*, address: str) -> None:
    key = _counter(address)
    _redis().pipeline().set(key, 0, ex=BAD_KEY_WINDOW_SECONDS, nx=True).incr(key).execute()
