from __future__ import annotations

import json
import re

from django import template

from apps.dashboard.selectors import KIND_WORDS, memory_write_rates
from apps.language.english import second_person

register = template.Library()


@register.filter
def as_text(value) -> str:
    """A payload value as readable text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


# What the mind stream says to its owner ("Learned 2 new things about you"), said of them to an
# admin watching it ("… about bob"); the verb forms that change with the person come first.
_SECOND_PERSON = re.compile(r"\b(you are|you were|you have|yours|your|you)\b", re.IGNORECASE)
_THIRD_PERSON = {
    "you are": "{name} is",
    "you were": "{name} was",
    "you have": "{name} has",
    "yours": "{name}'s",
    "your": "{name}'s",
    "you": "{name}",
}


@register.filter
def spoken_of(text: str, mind) -> str:
    """`text` as the watcher of `mind` reads it: unchanged for its owner and for global
    knowledge, with the owner's name for "you" to an admin watching another user."""
    if mind is None or mind.who in ("me", "global"):
        return text
    return _SECOND_PERSON.sub(
        lambda found: _THIRD_PERSON[found.group(1).lower()].format(name=mind.label), text
    )


@register.filter
def said_to_owner(text: str, mind) -> str:
    """A sentence of one's own Mind stream with its memory said to its owner ("…: you live in
    Ghent"); to anyone else as it is."""
    if mind is None or mind.who != "me":
        return text
    return second_person(text)


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
