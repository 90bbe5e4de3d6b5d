"""How memory's numbers and memories read on the pages."""

from __future__ import annotations

from django import template

from apps.language.facts.address import addressed as addressed_to_user

register = template.Library()


@register.filter
def addressed(description: str) -> str:
    """A memory as its own user reads it, said to them: "You live in Ghent". Only for pages
    that show a user their own memories; what the model is given stays as it is stored."""
    return addressed_to_user(description)


@register.filter
def percent(share: float | None) -> str:
    """A confidence on the 0 to 1 scale as the pages show every one: 0.8 → "80%"."""
    if share is None:
        return ""
    return f"{round(share * 100)}%"
