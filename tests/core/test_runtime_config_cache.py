"""The runtime configuration's shared cache never goes back to a row an edit replaced."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from apps.core.models import RuntimeConfig
from apps.core.selectors import _CACHE_KEY, runtime_config
from apps.core.services import runtime_config_save


@pytest.mark.django_db(transaction=True)
def test_a_reader_that_read_the_old_row_before_an_edit_cannot_cache_it_after():
    old = RuntimeConfig.objects.order_by("pk").first() or runtime_config_save(
        config=RuntimeConfig()
    )
    stale = RuntimeConfig.objects.get(pk=old.pk)  # another process reads the row
    edited = RuntimeConfig.objects.get(pk=old.pk)
    edited.max_memory_results = stale.max_memory_results + 3
    runtime_config_save(config=edited)  # the edit commits
    # ...and the reader, slower, then fills the cache as runtime_config() does on a miss.
    cache.add(_CACHE_KEY, stale, 300)
    assert runtime_config().max_memory_results == stale.max_memory_results + 3
