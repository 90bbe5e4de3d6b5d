"""Corrections: "actually it's Ghent, not Gent" replaces a known value the user names."""

from __future__ import annotations

import re
from datetime import date

from apps.language import facts as language_facts
from apps.language.facts.clauses import Clause, Fact
from apps.language.facts.grammar import Frame
from apps.language.facts.values import fact_of
from apps.language.text import sentences

_WHOLE = re.compile(r"(?P<v>.+)")
# The fact types a corrected value may be, by fact key.
_BY_KEY = {kind.fact_key: name for name, kind in language_facts.FACT_TYPES.items() if kind.fact_key}


def corrections(text: str, *, language: str | None = None) -> list[tuple[str, str]]:
    """(new value, old value) of each correction in `text`, as typed."""
    found = []
    for sentence in sentences(text):
        grammar = language_facts.grammar_for(language or "en")
        match = grammar.regex("correction").match(sentence.strip())
        if match:
            found.append((match.group("new").strip(" \"'"), match.group("old").strip(" \"'")))
    return found


def corrected_statements(text: str, *, today: date, language: str | None, known: dict[str, str]):
    """The statements a correction makes of a known single value: the new value, when it is
    of the same kind as the old one ("Ghent" a place, as "Gent" was)."""
    from apps.cognition.statements import statement_of_fact

    grammar = language_facts.grammar_for(language or "en")
    found = []
    for new, old in corrections(text, language=language):
        for fact_key, value in known.items():
            if value.casefold() != old.casefold() or fact_key not in _BY_KEY:
                continue
            frame = Frame(_BY_KEY[fact_key], "(?P<v>.+)", explicit=True)
            clause = Clause(original=new, text=new.lower())
            match = _WHOLE.match(clause.text)
            fact: Fact | None = fact_of(frame, clause.text, clause, grammar, match,
                                      lowercase=new == new.lower())  # fmt: skip
            if fact is not None:
                found.append(statement_of_fact(fact, today=today))
    return found
