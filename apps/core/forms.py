"""The runtime configuration's admin form: each role's model offered from what its endpoint
lists, and each role's fallback chain as lines of text."""

from __future__ import annotations

from django import forms
from django.contrib.admin.widgets import AdminTextInputWidget
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

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


class RuntimeConfigForm(forms.ModelForm):
    model_fallbacks = FallbackChainsField(
        label="Fallback models",
        help_text=RuntimeConfig._meta.get_field("model_fallbacks").help_text,
    )

    class Meta:
        model = RuntimeConfig
        # The admin adds the rest (its fieldsets).
        fields = [*(model_field(role) for role in ROLES), "model_fallbacks"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        listed = listed_models(self.instance)
        for role in ROLES:
            field = self.fields.get(model_field(role))
            if field is None:
                continue
            models = listed[role]
            field.widget = ListedModelInput(models or [], field.widget.attrs)
            if models is None:
                field.help_text += " (The endpoint could not be asked which models it has.)"
