from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"
    label = "core"
    verbose_name = "Thalamus core"

    def ready(self) -> None:
        from apps.core.db import register_adapters

        # Before any connection opens: each copies psycopg's adapters when it does.
        register_adapters()
