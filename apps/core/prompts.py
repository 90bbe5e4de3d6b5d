"""Prompt templates: prompts/<name>.txt with {{placeholder}} slots the code fills.

Core holds them beside the admin's overrides (PromptOverride, read by `selectors.prompt_text`)
so that a template is checked where it is stored; cognition fills them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from django.conf import settings

PLACEHOLDER = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")

# Every template the code uses, with the placeholders the code fills in it.
PROMPT_PLACEHOLDERS: dict[str, frozenset[str]] = {
    "answer": frozenset({"date", "user_name", "memory"}),
    "title": frozenset({"exchange"}),
    "extract": frozenset({"messages"}),
    "criticise": frozenset({"memory", "known", "exchange"}),
    "episode": frozenset({"transcript"}),
    "debate": frozenset({"rules", "question", "draft"}),
    "world": frozenset({"state", "history", "message"}),
}
# Placeholders a template may leave out: the shipped answer template no longer names the user
# (it would be the one line of the system prompt no two users share, read before every first
# answer; the name the user gives is in memory), an admin's may.
OPTIONAL_PLACEHOLDERS: dict[str, frozenset[str]] = {"answer": frozenset({"user_name"})}


class PromptError(ValueError):
    pass


def prompt_path(name: str):
    return settings.BASE_DIR / "prompts" / f"{name}.txt"


@lru_cache(maxsize=32)
def _file_text(name: str, mtime: float) -> str:
    return prompt_path(name).read_text(encoding="utf-8")


def file_prompt_text(name: str) -> str:
    path = prompt_path(name)
    return _file_text(name, path.stat().st_mtime)


def placeholders_of(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


def validate_template(name: str, text: str) -> list[str]:
    """Problems with a template's placeholders, as sentences; empty when it is fine."""
    expected = PROMPT_PLACEHOLDERS[name]
    found = placeholders_of(text)
    problems = []
    for unknown in sorted(found - expected):
        problems.append(f"prompt {name!r} uses {{{{{unknown}}}}}, which nothing fills")
    for missing in sorted(expected - found - OPTIONAL_PLACEHOLDERS.get(name, frozenset())):
        problems.append(f"prompt {name!r} lacks {{{{{missing}}}}}, which it must keep")
    return problems


def fill_prompt(name: str, text: str, **values: str) -> str:
    """Fill the template `text` of prompt `name`, read earlier with `prompt_text`."""
    expected = PROMPT_PLACEHOLDERS[name]
    if set(values) != expected:
        raise PromptError(f"prompt {name!r} needs exactly {sorted(expected)}, got {sorted(values)}")
    return PLACEHOLDER.sub(lambda match: values.get(match.group(1), match.group(0)), text)
