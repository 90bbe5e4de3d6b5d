"""How memory's numbers read on the pages."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def percent(share: float | None) -> str:
    """A confidence on the 0 to 1 scale as the pages show every one: 0.8 → "80%"."""
    if share is None:
        return ""
    return f"{round(share * 100)}%"
