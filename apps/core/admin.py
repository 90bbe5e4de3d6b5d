from __future__ import annotations

from django.contrib import admin

from apps.core.models import RuntimeConfig
from apps.core.services import runtime_config_save


@admin.register(RuntimeConfig)
class RuntimeConfigAdmin(admin.ModelAdmin):
    fieldsets = [
        (
            "LLM",
            {
                "fields": [
                    "llm_base_url",
                    "chat_model",
                    "critic_model",
                    "embed_model",
                    "temperature",
                ]
            },
        ),
        (
            "Context",
            {
                "fields": [
                    "short_term_window",
                    "max_memory_results",
                    "token_budget",
                    "renderer_language",
                ]
            },
        ),
        (
            "Retrieval weights",
            {
                "fields": [
                    "weight_vector",
                    "weight_text",
                    "weight_recency",
                    "weight_importance",
                    "weight_confidence",
                ]
            },
        ),
        (
            "Memory lifecycle",
            {
                "fields": [
                    "promotion_threshold",
                    "minimum_score",
                    "decay_hours",
                    "episode_idle_minutes",
                    "batch_size",
                ]
            },
        ),
        ("Toggles", {"fields": ["reflection_enabled", "critic_enabled", "debate_enabled"]}),
    ]

    def has_add_permission(self, request):
        return not RuntimeConfig.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        runtime_config_save(config=obj)
