from __future__ import annotations

import json

from django import template

register = template.Library()


@register.filter
def as_text(value) -> str:
    """A payload value as readable text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@register.filter
def thousands(value: int) -> str:
    return f"{value:,}"
