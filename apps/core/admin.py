from __future__ import annotations

import json

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db import models, transaction
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join

from apps.core.forms import RuntimeConfigForm, listed_models
from apps.core.llm.gateway import models_of
from apps.core.llm.limits import (
    EMBEDDING,
    all_model_limits,
    configured_models,
    role_endpoint,
    truncation_warnings,
)
from apps.core.llm.outcomes import LLMError
from apps.core.metrics import LlmMetricsRow, llm_metrics_rows
from apps.core.models import Event, PromptOverride, RuntimeConfig
from apps.core.prompts import PROMPT_PLACEHOLDERS, file_prompt_text, prompt_path
from apps.core.selectors import forget_prompt_override
from apps.core.services import runtime_config_save

ENDPOINT_CHECK_SECONDS = 3.0

admin.site.site_header = "Thalamus admin"
admin.site.site_title = "Thalamus admin"
admin.site.index_title = "Curate memory and tune Thalamus"


def endpoint_problem(base_url: str) -> str | None:
    """Why the LLM endpoint cannot be used right now, or None when it answers."""
    try:
        models_of(base_url, timeout=ENDPOINT_CHECK_SECONDS)
    except LLMError as exc:
        if exc.status_code is not None:
            return f"{base_url} answered HTTP {exc.status_code} when asked for its models."
        return f"{base_url} is unreachable ({exc.__class__.__name__})."
    return None


@admin.register(RuntimeConfig)
class RuntimeConfigAdmin(admin.ModelAdmin):
    form = RuntimeConfigForm
    # A local LLM server speaks plain HTTP: "localhost:11434/v1" means http://, not https://.
    formfield_overrides = {models.URLField: {"assume_scheme": "http"}}
    # Five folded sections instead of one long page; tests/core/test_admin.py checks that every
    # field of the model is in exactly one of them.
    fieldsets = [
        (
            "Models and endpoints",
            {
                "classes": ["collapse"],
                "description": "Each role may use its own endpoint and model; blank means the "
                "chat's. When a role's model fails (unreachable, too slow, not there, a server "
                "error), the next line of its fallback chain is asked.",
                "fields": [
                    "model_limits",
                    "llm_base_url",
                    "chat_model",
                    "allowed_chat_models",
                    "temperature",
                    ("embed_base_url", "embed_model"),
                    ("reflection_base_url", "reflection_model"),
                    ("critic_base_url", "critic_model"),
                    ("episode_base_url", "episode_model"),
                    ("title_base_url", "title_model"),
                    "router_model_enabled",
                    ("router_base_url", "router_model"),
                    "model_fallbacks",
                ],
            },
        ),
        (
            "Limits",
            {
                "classes": ["collapse"],
                "fields": [
                    "context_tokens",
                    "answer_max_tokens",
                    "short_term_window",
                    "router_timeout_seconds",
                    ("tool_rounds", "tool_timeout_seconds"),
                    "max_message_chars",
                    "turns_per_minute",
                ],
            },
        ),
        (
            "Memory",
            {
                "classes": ["collapse"],
                "fields": [
                    "memory_writes",
                    "max_memory_results",
                    "renderer_language",
                    "weight_vector",
                    "weight_text",
                    "weight_recency",
                    "weight_importance",
                    "weight_confidence",
                    "weight_context",
                    "neighbour_seconds",
                    "promotion_threshold",
                    "minimum_score",
                    "link_similarity",
                    "duplicate_similarity",
                    "link_neighbours",
                ],
            },
        ),
        (
            "Background",
            {
                "classes": ["collapse"],
                "description": "Reflection, the critic, episodes and titles run on their own "
                "worker queue.",
                "fields": [
                    "reflection_enabled",
                    "critic_enabled",
                    "debate_enabled",
                    "background_max_tokens",
                    "background_timeout_seconds",
                    "background_wait_seconds",
                    "batch_size",
                ],
            },
        ),
        (
            "Schedules",
            {
                "classes": ["collapse"],
                "description": "When background work happens. The periodic tasks themselves "
                "are under Periodic tasks.",
                "fields": [
                    ("reflection_quiet_seconds", "reflection_every_turns"),
                    "episode_idle_minutes",
                    "decay_hours",
                ],
            },
        ),
    ]

    readonly_fields = ["model_limits", "memory_writes"]

    @admin.display(description="Memory writes")
    def memory_writes(self, obj):
        return render_to_string("admin/core/runtimeconfig/_memory_writes.html")

    @admin.display(description="Models in use")
    def model_limits(self, obj):
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    limits.role,
                    limits.model,
                    limits.base_url,
                    f"{limits.context:,}",
                    f"{limits.reply_cap:,}" if limits.reply_cap else "—",
                    limits.source,
                )
                for limits in all_model_limits()
            ),
        )
        return format_html(
            "<table><thead><tr><th>Role</th><th>Model</th><th>Endpoint</th>"
            "<th>Context (tokens)</th><th>Reply cap</th><th>Window from</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            rows,
        )

    def _warn_about_truncation(self, request) -> None:
        for warning in truncation_warnings():
            self.message_user(
                request,
                f"{warning['model']} at {warning['base_url']} read only "
                f"{warning['reported_prompt_tokens']:,} of about "
                f"{warning['sent_tokens_estimate']:,} prompt tokens: {warning['fix']}",
                messages.WARNING,
            )

    def _warn_about_missing_models(self, request) -> None:
        for configured in configured_models():
            if configured.missing:
                self.message_user(request, configured.fix, messages.WARNING)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        if request.method == "GET":
            self._warn_about_truncation(request)
            self._warn_about_missing_models(request)
        else:
            # The servers are asked for their models before the admin's transaction opens;
            # the form inside it reads their answers from the cache.
            saved = self.get_object(request, unquote(object_id)) if object_id else None
            listed_models(saved or RuntimeConfig())
        return super().changeform_view(request, object_id, form_url, extra_context)

    def changelist_view(self, request, extra_context=None):
        """There is one configuration: its form opens instead of a list of one row (the add
        form until the row exists)."""
        config = RuntimeConfig.objects.order_by("pk").first()
        if config is None:
            return redirect("admin:core_runtimeconfig_add")
        return redirect("admin:core_runtimeconfig_change", config.pk)

    def has_add_permission(self, request):
        return not RuntimeConfig.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        runtime_config_save(config=obj)
        # The admin saves inside a transaction: the endpoints are asked once it has committed.
        transaction.on_commit(lambda: self._warn_about_endpoints(request, obj))

    def _warn_about_endpoints(self, request, obj) -> None:
        # A warning, not an error: the endpoint may be down for a moment, or not started yet.
        problem = endpoint_problem(obj.llm_base_url or settings.THALAMUS_LLM_BASE_URL)
        if problem:
            self.message_user(
                request, f"Saved, but the LLM endpoint is not usable: {problem}", messages.WARNING
            )
        embedder = role_endpoint(EMBEDDING, obj).base_url
        problem = embedder != (obj.llm_base_url or settings.THALAMUS_LLM_BASE_URL) and (
            endpoint_problem(embedder)
        )
        if problem:
            self.message_user(
                request,
                f"Saved, but the embedding endpoint is not usable: {problem}",
                messages.WARNING,
            )


def _braced(names) -> str:
    return ", ".join("{{" + name + "}}" for name in sorted(names))


@admin.register(PromptOverride)
class PromptOverrideAdmin(admin.ModelAdmin):
    list_display = ["name", "updated_at"]
    search_fields = ["name", "text"]
    readonly_fields = ["placeholders", "file_text"]
    fields = ["name", "placeholders", "text", "file_text"]
    actions = ["revert"]
    change_list_template = "admin/core/promptoverride/change_list.html"

    @admin.display(description="Placeholders it must keep")
    def placeholders(self, obj):
        names = PROMPT_PLACEHOLDERS.get(obj.name) if obj and obj.name else None
        if names is None:
            return "Pick a template: " + ", ".join(sorted(PROMPT_PLACEHOLDERS))
        return _braced(names)

    @admin.display(description="The file's text (what reverting restores)")
    def file_text(self, obj):
        if not obj or obj.name not in PROMPT_PLACEHOLDERS:
            return "-"
        return format_html("<pre>{}</pre>", file_prompt_text(obj.name))

    def get_changeform_initial_data(self, request):
        initial = super().get_changeform_initial_data(request)
        name = initial.get("name")
        if name in PROMPT_PLACEHOLDERS and "text" not in initial:
            initial["text"] = file_prompt_text(name)
        return initial

    def changelist_view(self, request, extra_context=None):
        overrides = dict(PromptOverride.objects.values_list("name", "pk"))
        templates = [
            {
                "name": name,
                "path": prompt_path(name).name,
                "override_id": overrides.get(name),
                "placeholders": ", ".join(
                    "{{" + p + "}}" for p in sorted(PROMPT_PLACEHOLDERS[name])
                ),
            }
            for name in sorted(PROMPT_PLACEHOLDERS)
        ]
        return super().changelist_view(
            request, {**(extra_context or {}), "prompt_templates": templates}
        )

    def save_model(self, request, obj, form, change):
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            transaction.on_commit(lambda: forget_prompt_override(obj.name))

    def delete_model(self, request, obj):
        name = obj.name
        with transaction.atomic():
            super().delete_model(request, obj)
            transaction.on_commit(lambda: forget_prompt_override(name))

    def delete_queryset(self, request, queryset):
        names = list(queryset.values_list("name", flat=True))
        with transaction.atomic():
            queryset.delete()
            transaction.on_commit(lambda: [forget_prompt_override(name) for name in names])

    @admin.action(description="Revert selected prompts to their file's text")
    def revert(self, request, queryset):
        count = queryset.count()
        self.delete_queryset(request, queryset)
        self.message_user(request, f"{count} prompt(s) reverted to the file's text.")


class EventOwnerFilter(admin.SimpleListFilter):
    """Owner filter that lists only users with events and offers global knowledge."""

    title = "owner"
    parameter_name = "owner"

    def lookups(self, request, model_admin):
        from django.contrib.auth import get_user_model

        users = get_user_model().objects.filter(events__isnull=False).distinct()
        return [("global", "Global"), *[(str(u.pk), u.get_username()) for u in users[:200]]]

    def queryset(self, request, queryset):
        if self.value() == "global":
            return queryset.filter(owner=None)
        if self.value():
            return queryset.filter(owner_id=self.value())
        return queryset


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "kind", "owner", "summary"]
    list_filter = ["kind", EventOwnerFilter, "created_at"]
    list_select_related = ["owner"]
    search_fields = ["summary"]
    date_hierarchy = "created_at"
    readonly_fields = ["created_at", "kind", "owner", "summary", "payload_pretty"]
    fields = readonly_fields
    show_full_result_count = False

    @admin.display(description="Payload")
    def payload_pretty(self, obj):
        return format_html("<pre>{}</pre>", json.dumps(obj.payload, indent=2, ensure_ascii=False))

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    return f"{value:.2f} s"


def _metrics_cells(row: LlmMetricsRow) -> dict:
    return {
        "role": row.role,
        "model": row.model,
        "requests": f"{row.requests:,.0f}",
        "errors": f"{row.errors:,.0f}",
        "has_errors": row.errors > 0,
        "tokens_in": f"{row.tokens_in:,.0f}",
        "tokens_out": f"{row.tokens_out:,.0f}",
        "ttft_mean": _seconds(row.ttft.mean),
        "ttft_p95": _seconds(row.ttft.p95),
        "latency_mean": _seconds(row.latency.mean),
        "latency_p95": _seconds(row.latency.p95),
    }


def llm_metrics_view(request):
    """The admin's "LLM metrics" page (wrapped in admin.site.admin_view: staff only)."""
    context = {
        **admin.site.each_context(request),
        "title": "LLM metrics",
        "rows": [_metrics_cells(row) for row in llm_metrics_rows()],
    }
    return TemplateResponse(request, "admin/llm_metrics.html", context)
