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


# A turn that says the words before it were wrong ("wait no", "sorry, I meant", "anzi"), not
# a filler before more of the same ("I mean, I love it"): only it drops a value it does not
# replace, or replaces a value at once when it opens a message.
_WRONG = re.compile(
    r"\b(?:no|non|nein|scratch|correction|correzione|corrección|korrektur|anzi|rather|plutôt"
    r"|make that|meant|sorry|oops|voulais|quise|intendevo|meinte|pardon|perdón|scusa)\b",
    re.IGNORECASE,
)


def without_taken_back(text: str, statements: list, *, today: date, language: str | None):
    """`statements` of a message less the single values it takes back: "I'm a software tester.
    wait no, I got moved up to QA lead" keeps the QA lead only; "I live in Leeds, I mean
    Bradford" reads the bare "Bradford" as the home it replaces. A message that takes back
    something it does not restate ("wait no, …") loses the last single value before the turn:
    a wrong value is worse than none; a filler ("I mean, I love it") takes nothing back. Each
    statement is matched to its place in `text` by its quote."""
    from apps.cognition.statements import statement_of_fact

    grammar = language_facts.grammar_for(language or language_facts.language_of(text) or "en")
    turn = next((m for m in grammar.regex("takes_back").finditer(text) if m.start() > 0), None)
    if turn is None:
        return statements

    def place(statement) -> int:
        return text.casefold().find(statement.quote.casefold()) if statement.quote else -1

    before = sorted(
        (s for s in statements if s.fact_key and 0 <= place(s) < turn.start()), key=place
    )
    replaced = {s.fact_key for s in statements if s.fact_key and place(s) >= turn.end()}
    extra = []
    if not replaced and before:
        last = before[-1]
        after = text[turn.end() :].strip(" .!?,")
        # "anzi no, a Verona": the bare value without the word that leads it.
        lead, _, rest = after.partition(" ")
        if rest and lead.casefold() in grammar.place_leads | grammar.articles:
            after = rest
        if last.fact_key in _BY_KEY and 0 < len(after.split()) <= 4:
            frame = Frame(_BY_KEY[last.fact_key], "(?P<v>.+)", explicit=True)
            clause = Clause(original=after, text=after.lower())
            fact = fact_of(frame, clause.text, clause, grammar, _WHOLE.match(clause.text),
                           lowercase=after == after.lower())  # fmt: skip
            if fact is not None:
                extra.append(statement_of_fact(fact, today=today))
        if extra or _WRONG.search(turn.group(0)):
            replaced = {last.fact_key}
    kept = [s for s in statements if not (s in before and s.fact_key in replaced)]
    return kept + [s for s in extra if s not in kept]


def opens_taking_back(text: str, *, language: str | None = None) -> bool:
    """Does the message open by taking back what the user said before ("anzi no scusa, …",
    "wait no, I meant …")?"""
    grammar = language_facts.grammar_for(language or language_facts.language_of(text) or "en")
    turn = grammar.regex("takes_back").match(text.strip())
    return turn is not None and turn.end() > 0 and _WRONG.search(turn.group(0)) is not None
