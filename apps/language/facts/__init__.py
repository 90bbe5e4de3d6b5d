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


def read(sentence: str, *, language: str | None = None, strict: bool = False) -> list[Clause]:
    """The clauses of `sentence` with their facts, read in `language`. Unless the caller is
    sure of it (`strict`), a sentence in which that language finds nothing at all (no fact, no
    decoy) is read in the other languages: a short message's language is a guess."""
    first = clauses_of(sentence, grammar_for(language)) if language in _MODULES else None
    if first is not None and (strict or any(c.facts or c.decoy for c in first)):
        return first
    readings = [
        clauses_of(sentence, grammar_for(code))
        for code in LANGUAGES
        if code in _MODULES and code != language
    ]
    # The language whose constructions place the most ("Mehmet, 34, Busfahrer" is German:
    # English places the name and the age, German the job too); else one that finds a decoy.
    placed = max(readings, key=lambda reading: sum(len(c.facts) for c in reading))
    if any(clause.facts for clause in placed):
        return placed
    for reading in readings:
        if any(clause.decoy for clause in reading):
            return reading
    return first if first is not None else readings[0]
