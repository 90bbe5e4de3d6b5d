"""The answer's system prompt: a start every answer shares, then what is the user's.

The start is the answer template's instructions (its paragraphs before the one with the first
placeholder) and, with memory on, what datamarks mean (`MARKERS_SENTENCE`, which names every
marker, so it is the same in every conversation). It holds nobody's name, date or world, so
a server's prompt cache keeps one copy of it for every user and conversation, and a starting
web process sends it once (apps/cognition/prompt_cache.py): a conversation's first turn then
reads only what follows. After it come today's date and the user's name, the world state a
person wrote by hand, and the user's custom instructions; an API client's own system prompt
leads.
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo

from django.utils import timezone

from apps.core.prompts import PLACEHOLDER, fill_prompt
from apps.memory.provenance import MARKERS_SENTENCE

BLANK_LINES = re.compile(r"\n\s*\n(\s*\n)+")


def answer_prefix(template: str) -> str:
    """The answer template's paragraphs before the one with its first placeholder
    (`system_prompt`'s spacing). Empty when the template starts with a placeholder."""
    head = PLACEHOLDER.split(template, maxsplit=1)[0]
    return BLANK_LINES.sub("\n\n", head[: max(head.rfind("\n\n"), 0)]).strip()


def answer_start(template: str, *, marked: bool = True) -> str:
    """What every answer's system prompt starts with, whoever asks and whenever: the template's
    instructions, then (`marked`: memory on) the sentence on datamarks."""
    parts = [answer_prefix(template), MARKERS_SENTENCE if marked else ""]
    return "\n\n".join(part for part in parts if part)


def system_prompt(
    *,
    template: str,
    time_zone: str,
    user_name: str,
    world: str,
    instructions: str,
    client_system: str = "",
    marker: str = "",
) -> str:
    """What stays the same from turn to turn: the shared start (`answer_start`; the sentence on
    datamarks when the conversation has a `marker`, none without memory), then the rest of
    the template with the world state in its memory slot (only what a person wrote by hand),
    the user's custom instructions after it (never dropped), an API client's own system prompt
    first."""
    system = fill_prompt(
        "answer", template, date=_today(time_zone), user_name=user_name, memory=world
    )
    system = BLANK_LINES.sub("\n\n", system).strip()
    prefix = answer_prefix(template)
    if marker and system.startswith(prefix):
        rest = system[len(prefix) :].strip()
        system = "\n\n".join(part for part in [answer_start(template), rest] if part)
    if instructions:
        system = f"{system}\n\n{instructions}"
    if client_system:
        system = f"{client_system}\n\n{system}"
    return system


def _today(time_zone: str) -> str:
    """Today's date where the user is (their time zone), the server's when unknown."""
    if time_zone:
        return timezone.localdate(timezone=ZoneInfo(time_zone)).isoformat()
    return timezone.localdate().isoformat()
