from __future__ import annotations

from django.db import transaction

from apps.core.models import RuntimeConfig
from apps.core.selectors import forget_runtime_config


@transaction.atomic
def runtime_config_save(*, config: RuntimeConfig) -> RuntimeConfig:
    config.full_clean()
    if config.pk is None:
        existing = RuntimeConfig.objects.select_for_update().order_by("pk").first()
        if existing is not None:
            config.pk = existing.pk
    config.save()
    transaction.on_commit(forget_runtime_config)
    return config
