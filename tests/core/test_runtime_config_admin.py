"""The admin's runtime configuration: five folded sections, every field in one, each explained."""

from __future__ import annotations

from collections import Counter

import pytest
from django.contrib import admin
from django.urls import reverse

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
