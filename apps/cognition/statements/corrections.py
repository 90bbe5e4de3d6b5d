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
    grammar = language_facts.grammar_for(language or "en")
    found = []
    for new, old in corrections(text, language=language):
        for fact_key, value in known.items():
            if value.casefold() != old.casefold():
                continue
            statement = _read_as(new, fact_key, grammar, today=today)
            if statement is not None:
                found.append(statement)
    return found


def _read_as(value: str, fact_key: str, grammar, *, today: date):
    """`value` typed alone ("Ghent", "a midwife") as a fact of `fact_key`'s kind, or None when
    it is no value of that kind."""
    from apps.cognition.statements import statement_of_fact

    if fact_key not in _BY_KEY:
        return None
    frame = Frame(_BY_KEY[fact_key], "(?P<v>.+)", explicit=True)
    clause = Clause(original=value, text=value.lower())
    fact: Fact | None = fact_of(frame, clause.text, clause, grammar, _WHOLE.match(clause.text),
                                lowercase=value == value.lower())  # fmt: skip
    return statement_of_fact(fact, today=today) if fact is not None else None


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
    grammar = _grammar_of(text, language)

    def place(statement) -> int:
        return text.casefold().find(statement.quote.casefold()) if statement.quote else -1

    statements = _without_past(text, statements, grammar, place)
    turn = next((m for m in grammar.regex("takes_back").finditer(text) if m.start() > 0), None)
    if turn is None:
        return statements

    before = sorted(
        (s for s in statements if s.fact_key and 0 <= place(s) < turn.start()), key=place
    )
    replaced = {s.fact_key for s in statements if s.fact_key and place(s) >= turn.end()}
    restated = None
    if not replaced and before:
        last = before[-1]
        after = text[turn.end() :].strip(" .!?,")
        # "anzi no, a Verona": the bare value without the word that leads it.
        lead, _, rest = after.partition(" ")
        if rest and lead.casefold() in grammar.place_leads | grammar.articles:
            after = rest
        if 0 < len(after.split()) <= 4:
            restated = _read_as(after, last.fact_key, grammar, today=today)
        if restated is not None or _WRONG.search(turn.group(0)):
            replaced = {last.fact_key}
    kept = [s for s in statements if not (s in before and s.fact_key in replaced)]
    return kept + [restated] if restated is not None and restated not in kept else kept


# How far before a clause that puts it in the past a value may be and still be the one it is
# about ("I'm a lawyer at Baker & Co. Well, was.").
_PAST_REACH = 80


def _without_past(text: str, statements: list, grammar, place) -> list:
    """`statements` less the single values of the clause that each clause putting it in the past
    follows ("i'm a lawyer, well was, retired last year", "sono avvocato, cioè ero"; a job and
    its employer go together): the user said it, then said it is no longer so. Nothing is stored
    for it: a former job read as the current one is a wrong memory, and "was" alone does not say
    when it ended."""
    past = [m.start() for m in grammar.regex("no_longer").finditer(text.casefold()) if m.start()]
    dropped = set()
    for start in past:
        before = [s for s in statements if s.fact_key and start - _PAST_REACH <= place(s) < start]
        if before:
            last = max(place(s) for s in before)
            dropped.update(id(s) for s in before if place(s) == last)
    return [s for s in statements if id(s) not in dropped]


def opens_taking_back(text: str, *, language: str | None = None) -> bool:
    """Does the message open by taking back what the user said before ("anzi no scusa, …",
    "wait no, I meant …")?"""
    turn = _grammar_of(text, language).regex("takes_back").match(text.strip())
    return turn is not None and turn.end() > 0 and _WRONG.search(turn.group(0)) is not None


def _grammar_of(text: str, language: str | None):
    return language_facts.grammar_for(language or language_facts.language_of(text) or "en")
