from __future__ import annotations

import json

from django import template

from apps.dashboard.selectors import KIND_WORDS, memory_write_rates

register = template.Library()


@register.filter
def as_text(value) -> str:
    """A payload value as readable text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@register.filter
def kind_word(kind: str) -> str:
    """An event's kind as the mind stream names it to the user."""
    return KIND_WORDS.get(kind, kind)


@register.filter
def thousands(value: int) -> str:
    return f"{value:,}"


@register.inclusion_tag("dashboard/_write_rate.html")
def write_rate_of_all_users() -> dict:
    """The memory write rate over every user, for the admin's runtime configuration (core's
    admin shows it through this tag: core imports no app above it)."""
    return {"writes": memory_write_rates(owner_id=None), "all_users": True}
