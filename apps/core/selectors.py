from __future__ import annotations

import zlib

from django.core.cache import cache

from apps.core.models import RuntimeConfig


def _cache_key() -> str:
    # Named after the model's fields: a configuration cached by a version of Thalamus with other
    # fields is never unpickled into this one (missing fields would each cost a query, or fail).
    fields = ",".join(field.attname for field in RuntimeConfig._meta.concrete_fields)
    return f"core:runtime-config:{zlib.crc32(fields.encode()):08x}"


_CACHE_KEY = _cache_key()


def runtime_config() -> RuntimeConfig:
    """The runtime configuration, from the shared cache so every process sees an edit at once."""
    config = cache.get(_CACHE_KEY)
    if config is None:
        config = RuntimeConfig.objects.order_by("pk").first() or RuntimeConfig()
        cache.set(_CACHE_KEY, config, 300)
    return config


def forget_runtime_config() -> None:
    cache.delete(_CACHE_KEY)
