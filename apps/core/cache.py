"""Django's Redis cache, with one connection pool and one client per server for the process.

Django keeps its cache objects in an `asgiref.local.Local` that is not thread-critical: under
ASGI each request runs in a context of its own, so each request built a new cache object, a new
connection pool with it, and opened a new connection to Redis (connect + HELLO, ~1.5 ms of the
request's time, and a socket left for the garbage collector). Django's `RedisCacheClient` also
wraps its pool in a new `redis.Redis` for every get or set (~0.16 ms of Python each).

A redis-py pool and a client over it are safe to share between threads, so here every cache
object of the process uses the same pool and client for the same server and options.
"""

from __future__ import annotations

import os
import threading

from django.core.cache.backends import redis as django_redis

_shared: dict[tuple, tuple[object, object]] = {}
_shared_lock = threading.Lock()


class RedisCacheClient(django_redis.RedisCacheClient):
    def _shared_key(self, index: int) -> tuple:
        options = tuple(sorted((name, repr(value)) for name, value in self._pool_options.items()))
        # A forked child (a prefork worker) must not use its parent's sockets.
        return (os.getpid(), self._servers[index], options)

    def _pool_and_client(self, write: bool) -> tuple[object, object]:
        found = _shared.get(key := self._shared_key(self._get_connection_pool_index(write)))
        if found is None:
            with _shared_lock:
                found = _shared.get(key)
                if found is None:
                    pool = self._pool_class.from_url(key[1], **self._pool_options)
                    found = _shared[key] = (pool, self._client(connection_pool=pool))
        return found

    def _get_connection_pool(self, write):
        return self._pool_and_client(write)[0]

    def get_client(self, key=None, *, write=False):
        return self._pool_and_client(write)[1]


class RedisCache(django_redis.RedisCache):
    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient


def redis_client():
    """The redis-py client behind Django's cache, for what the cache API cannot say (sorted
    sets, scans, pings). The one place that reaches into the cache backend."""
    from django.core.cache import cache

    return cache._cache.get_client(write=True)
