"""The answer's system prompt: a start every answer shares, then what is the user's.

The start is the answer template's instructions (its paragraphs before the one with the first
placeholder), with memory on what datamarks mean (`MARKERS_SENTENCE`, which names every marker,
so it is the same in every conversation), and the template's paragraphs after them that hold
only today's date. It holds nobody's name, world or instructions, so a server's prompt cache
keeps one copy of it for every user and conversation of a day, and a web process sends it
(apps/cognition/prompt_cache.py): a conversation's first turn then reads only what follows.
After it come the world state a person wrote by hand (the template's memory slot) and the
user's custom instructions; an API client's own system prompt leads.
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo

from django.utils import timezone

from apps.core.prompts import PLACEHOLDER, fill_prompt
from apps.memory.provenance import MARKERS, MARKERS_SENTENCE

BLANK_LINES = re.compile(r"\n\s*\n(\s*\n)+")


def answer_prefix(template: str) -> str:
    """The answer template's paragraphs before the one with its first placeholder
    (`system_prompt`'s spacing). Empty when the template starts with a placeholder."""
    head = PLACEHOLDER.split(template, maxsplit=1)[0]
    return BLANK_LINES.sub("\n\n", head[: max(head.rfind("\n\n"), 0)]).strip()


def answer_start(template: str, *, marked: bool = True, time_zone: str = "") -> str:
    """What every answer's system prompt starts with, whoever asks, on the day it is in
    `time_zone` (the server's when blank): the template's instructions, then (`marked`: memory
    on) the sentence on datamarks, then the paragraphs that hold only the date."""
    system = system_prompt(
        template=template,
        time_zone=time_zone,
        user_name=_SOMEONE,
        world=_SOMEONE,
        instructions="",
        marker=MARKERS[0] if marked else "",
    )
    paragraphs = system.split("\n\n")
    mine = next(i for i, paragraph in enumerate(paragraphs) if _SOMEONE in paragraph)
    return "\n\n".join(paragraphs[:mine])


# Stands for what is one user's in `answer_start`: nothing a template says holds it.
_SOMEONE = "\x00someone\x00"


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
    """What stays the same from turn to turn: the template's instructions and the sentence on
    datamarks when the conversation has a `marker` (none without memory), then the rest of the
    template (today's date; the world state in its memory slot, only what a person wrote by
    hand), the user's custom instructions after it (never dropped), an API client's own system
    prompt first. Its start is `answer_start`'s."""
    system = fill_prompt(
        "answer", template, date=_today(time_zone), user_name=user_name, memory=world
    )
    system = BLANK_LINES.sub("\n\n", system).strip()
    prefix = answer_prefix(template)
    if marker and system.startswith(prefix):
        rest = system[len(prefix) :].strip()
        system = "\n\n".join(part for part in [prefix, MARKERS_SENTENCE, rest] if part)
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
