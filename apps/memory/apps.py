from __future__ import annotations

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "apps.memory"
    label = "memory"
    verbose_name = "Memory"
