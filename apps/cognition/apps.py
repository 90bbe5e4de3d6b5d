from __future__ import annotations

from django.apps import AppConfig


class CognitionConfig(AppConfig):
    name = "apps.cognition"
    label = "cognition"
    verbose_name = "Cognition"

    def ready(self) -> None:
        from apps.cognition import checks  # noqa: F401  (registers the prompt check)
