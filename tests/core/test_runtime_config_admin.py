"""The admin's runtime configuration: five folded sections, every field in one, each explained."""

from __future__ import annotations

from collections import Counter

import pytest
from django.contrib import admin
from django.forms import model_to_dict
from django.urls import reverse

from apps.accounts.services import user_settings_update
from apps.core.forms import LABELS, RuntimeConfigForm
from apps.core.models import RuntimeConfig

SECTIONS = ["Models and endpoints", "Limits", "Memory", "Background", "Schedules"]


def _fieldset_fields(fieldsets) -> list[str]:
    names = []
    for _, options in fieldsets:
        for entry in options["fields"]:
            names.extend(entry if isinstance(entry, tuple) else [entry])
    return names


def _editable_fields() -> set[str]:
    return {f.name for f in RuntimeConfig._meta.fields if f.editable and f.name != "id"}


def test_the_runtime_configuration_is_in_five_collapsible_sections():
    fieldsets = admin.site._registry[RuntimeConfig].fieldsets

    assert [name for name, _ in fieldsets] == SECTIONS
    assert all("collapse" in options.get("classes", []) for _, options in fieldsets)


def test_every_runtime_field_is_in_exactly_one_section():
    model_admin = admin.site._registry[RuntimeConfig]
    counts = Counter(_fieldset_fields(model_admin.fieldsets))

    assert {name for name, n in counts.items() if n > 1} == set()
    assert set(counts) == _editable_fields() | set(model_admin.readonly_fields)


def test_every_runtime_field_has_help_text():
    unexplained = [
        f.name
        for f in RuntimeConfig._meta.fields
        if f.name in _editable_fields() and not str(f.help_text).strip()
    ]

    assert unexplained == []


@pytest.mark.django_db
def test_the_change_page_shows_each_section_folded_with_each_fields_help(admin_client):
    config = RuntimeConfig.objects.create()

    response = admin_client.get(reverse("admin:core_runtimeconfig_change", args=[config.pk]))

    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('<fieldset class="module aligned collapse"') == len(SECTIONS)
    assert html.count("<details>") == len(SECTIONS)
    for field in RuntimeConfig._meta.fields:
        if field.name in _editable_fields():
            assert str(field.help_text) in html, field.name


@pytest.mark.django_db
def test_the_configuration_opens_as_its_form_not_a_list_of_one_row(admin_client):
    url = reverse("admin:core_runtimeconfig_changelist")
    assert admin_client.get(url)["Location"] == reverse("admin:core_runtimeconfig_add")
    config = RuntimeConfig.objects.create()

    response = admin_client.get(url)

    assert response["Location"] == reverse("admin:core_runtimeconfig_change", args=[config.pk])


def test_every_runtime_field_has_a_label_in_words():
    assert _editable_fields() - {"model_fallbacks"} <= set(LABELS)


@pytest.mark.django_db
def test_the_change_page_labels_fields_in_words_and_thresholds_in_percent(admin_client):
    config = RuntimeConfig.objects.create(promotion_threshold=3, minimum_score=-1)

    html = admin_client.get(
        reverse("admin:core_runtimeconfig_change", args=[config.pk])
    ).content.decode()

    assert "Llm base url" not in html and "Chat endpoint URL" in html
    assert "Confidence to keep long-term (%)" in html
    assert 'name="promotion_threshold" value="60"' in html
    assert 'name="minimum_score" value="0"' in html


@pytest.mark.django_db
def test_a_threshold_typed_in_percent_is_kept_as_the_score_that_shows_it():
    config = RuntimeConfig.objects.create(promotion_threshold=3, minimum_score=-1)
    data = {**model_to_dict(config), "promotion_threshold": 75, "minimum_score": 0}
    data = {k: v for k, v in data.items() if v is not None and v is not False}

    form = RuntimeConfigForm(data=data, instance=config)

    assert form.is_valid(), form.errors
    # 75% is the share of 6 votes; a percent left as shown keeps its score (-1 shows as 0%).
    assert form.cleaned_data["promotion_threshold"] == 6
    assert form.cleaned_data["minimum_score"] == -1
    assert RuntimeConfigForm(data={**data, "promotion_threshold": 0}).errors["promotion_threshold"]


@pytest.mark.django_db
def test_the_admin_follows_the_theme_the_user_chose_on_the_site(admin_client, admin_user):
    user_settings_update(user=admin_user, theme="dark")

    html = admin_client.get(reverse("admin:index")).content.decode()

    # admin_theme.js hands it to Django's theme.js, which it precedes.
    assert 'admin_theme.js" data-theme="dark" data-save-url="/accounts/settings/theme/"' in html
    assert html.index("admin_theme.js") < html.index("admin/js/theme.js")
