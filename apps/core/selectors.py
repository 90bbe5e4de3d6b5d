from __future__ import annotations

import zlib
from collections.abc import Mapping

from django.core.cache import cache

from apps.core.models import PromptOverride, RuntimeConfig
from apps.core.prompts import file_prompt_text


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
        # Only into an empty slot: a reader that read the row just before an edit committed
        # must not cache the old row over the one the edit put there (`remember_runtime_config`).
        cache.add(_CACHE_KEY, config, 300)
    return config


def forget_runtime_config() -> None:
    cache.delete(_CACHE_KEY)


def remember_runtime_config(config: RuntimeConfig) -> None:
    """Cache `config` as the runtime configuration, over whatever the cache held."""
    cache.set(_CACHE_KEY, config, 300)


def cached_value(key: str, cached: Mapping | None):
    """`key` from the shared cache, or from what one `cache.get_many` already read (a key it
    lacks counts as not cached: None)."""
    return cache.get(key) if cached is None else cached.get(key)


def override_cache_key(name: str) -> str:
    return f"prompts:override:{name}"


def prompt_text(name: str, *, cached: Mapping | None = None) -> str:
    """The admin's override of a template if there is one, else the file's text.

    Overrides are read through the shared cache, so every web process and worker sees an edit
    from its next call; `forget_prompt_override` runs when one is saved or deleted. `cached`:
    see `cached_value`.
    """
    key = override_cache_key(name)
    override = cached_value(key, cached)
    if override is None:
        row = PromptOverride.objects.filter(name=name).values_list("text", flat=True).first()
        override = row or ""
        cache.set(key, override, 300)
    return override or file_prompt_text(name)


def forget_prompt_override(name: str) -> None:
    cache.delete(override_cache_key(name))
