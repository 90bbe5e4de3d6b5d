"""The facts a user's sentence states about them, in the five languages.

`read(sentence, language=...)` gives its clauses, each with the facts a construction of the
language places (apps.language.facts.engine) and whether it is a decoy; `description` writes a
fact as a memory says it (apps.language.facts.describe).
"""

from __future__ import annotations

import importlib

from apps.language.detect import LANGUAGES, message_language
from apps.language.facts.engine import Clause, Fact, clauses_of
from apps.language.facts.grammar import FACT_TYPES, SINGLE_VALUED, Grammar

__all__ = ["FACT_TYPES", "SINGLE_VALUED", "Clause", "Fact", "grammar_for", "read", "language_of"]

_MODULES = {"en": "english", "it": "italian", "fr": "french", "de": "german", "es": "spanish"}


def grammar_for(language: str) -> Grammar:
    module = importlib.import_module(f"apps.language.facts.grammars.{_MODULES[language]}")
    return module.GRAMMAR


def language_of(text: str, *, preferred: str | None = None) -> str | None:
    return message_language(text, preferred=preferred)


def read(sentence: str, *, language: str | None = None) -> list[Clause]:
    """The clauses of `sentence` with their facts, read in `language`; when it is not known,
    in the first language whose constructions place a fact, else the first that finds a
    decoy, else English."""
    if language in _MODULES:
        return clauses_of(sentence, grammar_for(language))
    readings = [clauses_of(sentence, grammar_for(code)) for code in LANGUAGES if code in _MODULES]
    for wanted in (lambda c: c.facts, lambda c: c.decoy):
        for reading in readings:
            if any(wanted(clause) for clause in reading):
                return reading
    return readings[0]
