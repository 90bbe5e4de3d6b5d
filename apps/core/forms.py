"""The runtime configuration's admin form: each role's model offered from what its endpoint
lists, and each role's fallback chain as lines of text."""

from __future__ import annotations

from django import forms
from django.contrib.admin.widgets import AdminTextInputWidget
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from apps.core.confidence import confidence_share, score_at_least
from apps.core.llm.limits import (
    CHAT,
    EMBEDDING,
    FALLBACK_ROLES,
    ROLES,
    endpoint_models,
    role_endpoint,
)
from apps.core.models import RuntimeConfig


def model_field(role: str) -> str:
    """The RuntimeConfig field naming a role's model."""
    if role == CHAT:
        return "chat_model"
    if role == EMBEDDING:
        return "embed_model"
    return f"{role}_model"


class ListedModelInput(AdminTextInputWidget):
    """A text input that offers the models the endpoint lists; any other name may be typed
    (some servers list nothing, or serve a model under a name they do not list)."""

    def __init__(self, models: list[str], attrs: dict | None = None) -> None:
        super().__init__(attrs)
        self.models = models

    def render(self, name, value, attrs=None, renderer=None):
        list_id = f"{(attrs or {}).get('id') or name}_listed"
        html = super().render(name, value, {**(attrs or {}), "list": list_id}, renderer)
        options = format_html_join("", '<option value="{}">', ((model,) for model in self.models))
        return format_html('{}<datalist id="{}">{}</datalist>', html, list_id, options)


class FallbackChainsWidget(forms.MultiWidget):
    """A textarea per role that can fall back, one model (or "endpoint model") a line."""

    def __init__(self) -> None:
        super().__init__(
            {role: forms.Textarea(attrs={"rows": 2, "cols": 60}) for role in FALLBACK_ROLES}
        )

    def decompress(self, value):
        value = value if isinstance(value, dict) else {}
        return ["\n".join(value.get(role) or []) for role in FALLBACK_ROLES]

    def render(self, name, value, attrs=None, renderer=None):
        texts = value if isinstance(value, list | tuple) else self.decompress(value)
        attrs = attrs or {}
        rows = []
        for suffix, widget, role, text in zip(
            self.widgets_names, self.widgets, FALLBACK_ROLES, texts, strict=True
        ):
            sub_attrs = {**attrs, "id": f"{attrs['id']}{suffix}"} if attrs.get("id") else attrs
            rows.append(
                format_html(
                    '<div class="fallback-chain"><label for="{}">{}</label>{}</div>',
                    sub_attrs.get("id", ""),
                    role,
                    widget.render(name + suffix, text, sub_attrs, renderer),
                )
            )
        return format_html('<div class="fallback-chains">{}</div>', mark_safe("".join(rows)))


class FallbackChainsField(forms.MultiValueField):
    """{role: [entry, ...]} from a textarea per role; the model's clean() judges the entries."""

    widget = FallbackChainsWidget

    def __init__(self, **kwargs) -> None:
        super().__init__(
            [forms.CharField(required=False) for _ in FALLBACK_ROLES],
            require_all_fields=False,
            **{**kwargs, "required": False},
        )

    def compress(self, data_list):
        chains = {}
        for role, text in zip(FALLBACK_ROLES, data_list, strict=False):
            entries = [line.strip() for line in (text or "").splitlines() if line.strip()]
            if entries:
                chains[role] = entries
        return chains


def listed_models(config: RuntimeConfig) -> dict[str, list[str] | None]:
    """The models each role's endpoint lists, by role (None: it could not be asked); kept in
    the cache for a while (`endpoint_models`)."""
    return {role: endpoint_models(role_endpoint(role, config).base_url) for role in ROLES}


def percent_of(score: int) -> int:
    return round(confidence_share(score) * 100)


class ConfidencePercentField(forms.IntegerField):
    """A confidence threshold typed in percent, the scale every page shows confidence on; kept
    as the score (votes) the memory code compares."""

    def __init__(self, *, min_value: int = 0, **kwargs) -> None:
        # Past 98% the score for it grows past what the model allows (100 votes).
        super().__init__(min_value=min_value, max_value=98, **kwargs)


# The runtime configuration's fields in words (the admin's labels); units in brackets.
LABELS = {
    "llm_base_url": "Chat endpoint URL",
    "chat_model": "Chat model",
    "critic_model": "Critic model",
    "critic_base_url": "Critic endpoint URL",
    "reflection_model": "Reflection model",
    "reflection_base_url": "Reflection endpoint URL",
    "episode_model": "Episode model",
    "episode_base_url": "Episode endpoint URL",
    "title_model": "Title model",
    "title_base_url": "Title endpoint URL",
    "router_model_enabled": "World modifier on",
    "router_model": "World modifier model",
    "router_base_url": "World modifier endpoint URL",
    "router_timeout_seconds": "Tool loop round limit (seconds)",
    "tool_rounds": "Tool rounds before the answer",
    "tool_timeout_seconds": "Tool call limit (seconds)",
    "embed_model": "Embedding model",
    "embed_base_url": "Embedding endpoint URL",
    "allowed_chat_models": "Models users may pick",
    "temperature": "Temperature",
    "short_term_window": "Recent messages in the prompt",
    "max_memory_results": "Memories per turn",
    "context_tokens": "Context window (tokens)",
    "answer_max_tokens": "Longest answer (tokens)",
    "background_max_tokens": "Longest background reply (tokens)",
    "background_timeout_seconds": "Background call limit (seconds)",
    "background_wait_seconds": "Background wait for an answer (seconds)",
    "reflection_quiet_seconds": "Reflect after a quiet spell of (seconds)",
    "reflection_every_turns": "Reflect at the latest every (turns)",
    "weight_vector": "Weight: meaning (vector)",
    "weight_text": "Weight: words (full text)",
    "weight_recency": "Weight: recency",
    "weight_importance": "Weight: importance",
    "weight_confidence": "Weight: confidence",
    "weight_context": "Weight: best neighbour",
    "neighbour_seconds": "Neighbours within (seconds)",
    "promotion_threshold": "Confidence to keep long-term (%)",
    "minimum_score": "Lowest confidence kept (%)",
    "decay_hours": "Forget unconfirmed memories after (hours)",
    "episode_idle_minutes": "Sum up a conversation quiet for (minutes)",
    "batch_size": "Items per scheduled pass",
    "link_similarity": "Similarity to link two memories (0 to 1)",
    "duplicate_similarity": "Similarity to count as the same memory (0 to 1)",
    "link_neighbours": "Memories compared when one is promoted",
    "max_message_chars": "Longest message (characters)",
    "turns_per_minute": "Messages per user per minute",
    "reflection_enabled": "Reflection on",
    "critic_enabled": "Critic on",
    "debate_enabled": "Answer review on",
    "renderer_language": "Language of the knowledge block",
}

CONFIDENCE_SCALE = (
    " In percent, as the pages show confidence: a new memory is at 33%, one confirmed once "
    "at 50%, twice at 60%, three times at 67%."
)


class RuntimeConfigForm(forms.ModelForm):
    model_fallbacks = FallbackChainsField(
        label="Fallback models",
        help_text=RuntimeConfig._meta.get_field("model_fallbacks").help_text,
    )
    promotion_threshold = ConfidencePercentField(
        min_value=1,
        label=LABELS["promotion_threshold"],
        help_text=RuntimeConfig._meta.get_field("promotion_threshold").help_text + CONFIDENCE_SCALE,
    )
    minimum_score = ConfidencePercentField(
        label=LABELS["minimum_score"],
        help_text=RuntimeConfig._meta.get_field("minimum_score").help_text + CONFIDENCE_SCALE,
    )

    class Meta:
        model = RuntimeConfig
        # The admin adds the rest (its fieldsets).
        fields = [*(model_field(role) for role in ROLES), "model_fallbacks"]
        labels = LABELS

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name in ("promotion_threshold", "minimum_score"):
            if name in self.fields:
                self.initial[name] = percent_of(getattr(self.instance, name))
        listed = listed_models(self.instance)
        for role in ROLES:
            field = self.fields.get(model_field(role))
            if field is None:
                continue
            models = listed[role]
            field.widget = ListedModelInput(models or [], field.widget.attrs)
            if models is None:
                field.help_text += " (The endpoint could not be asked which models it has.)"

    def _score(self, name: str) -> int:
        # The lowest score that shows as at least the percent typed; a percent left as shown
        # keeps the score it was shown for (scores at or below 0 all show as 0%).
        typed = self.cleaned_data[name]
        saved = getattr(self.instance, name)
        return saved if typed == percent_of(saved) else score_at_least(typed)

    def clean_promotion_threshold(self) -> int:
        return self._score("promotion_threshold")

    def clean_minimum_score(self) -> int:
        return self._score("minimum_score")
