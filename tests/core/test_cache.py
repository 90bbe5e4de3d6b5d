"""The cache backend: Django's Redis cache with one client object per connection pool."""

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


def test_each_thread_has_its_own_client():
    clients = []

    def read():
        caches["default"].get("cache-test-thread")
        clients.append(caches["default"]._cache.get_client())

    threads = [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(client) for client in clients}) == 2
    assert all(client.ping() for client in clients)
