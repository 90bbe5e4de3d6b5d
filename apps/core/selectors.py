from __future__ import annotations

from django.core.cache import cache

from apps.core.models import RuntimeConfig

_CACHE_KEY = "core:runtime-config"


def runtime_config() -> RuntimeConfig:
    """The runtime configuration, from the shared cache so every process sees an edit at once."""
    config = cache.get(_CACHE_KEY)
    if config is None:
        config = RuntimeConfig.objects.order_by("pk").first() or RuntimeConfig()
        cache.set(_CACHE_KEY, config, 300)
    return config


def forget_runtime_config() -> None:
    cache.delete(_CACHE_KEY)
