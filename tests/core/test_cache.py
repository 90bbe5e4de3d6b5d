"""The cache backend: Django's Redis cache with one pool and client per server and process."""

from __future__ import annotations

import threading

from django.core.cache import caches

from apps.core.cache import RedisCache


def test_the_cache_is_ours_and_reuses_its_client_against_the_real_redis():
    cache = caches["default"]
    assert isinstance(cache, RedisCache)
    cache.set("cache-test", {"a": 1}, 30)
    assert cache.get("cache-test") == {"a": 1}
    assert cache.add("cache-test", "other", 30) is False
    assert cache.get_many(["cache-test", "cache-missing"]) == {"cache-test": {"a": 1}}
    client = cache._cache.get_client(write=True)
    assert cache._cache.get_client() is client, "a new client for a read"
    cache.delete("cache-test")
    assert cache.get("cache-test") is None


def test_threads_and_request_contexts_share_one_client_and_pool():
    """Django builds a cache object per thread and, under ASGI, per request context; each of
    them must reuse the process's pool rather than open connections of its own."""
    clients = []

    def read():
        caches["default"].get("cache-test-thread")
        clients.append(caches["default"]._cache.get_client())

    threads = [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    read()
    assert len({id(client) for client in clients}) == 1
    assert clients[0].ping()


def test_a_cache_for_another_server_gets_a_pool_of_its_own():
    here = caches["default"]
    other = RedisCache("redis://127.0.0.1:1/0", {})
    assert other._cache.get_client() is not here._cache.get_client()
    assert other._cache.get_client() is RedisCache("redis://127.0.0.1:1/0", {})._cache.get_client()
