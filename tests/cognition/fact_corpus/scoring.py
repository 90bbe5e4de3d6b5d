"""The labelled fact corpus (issue 37): chat messages in five languages, each with the facts
about the user a careful reader would keep, or none (a decoy), and how the statements made of a
message score against them.

Each language's file (en.yaml…) lists items: `text`, the message as typed; `facts`, what to
remember, each a `key` (a single-valued fact of KEYS, or "" for one of many: a like, a diet, an
allergy, a way to answer, a pet, a relative), a `value` (words of the message a memory of it
must hold) and `about: other` when it is a relative's or a pet's fact ("my son Mateo is
allergic to eggs": the memory names Mateo); a decoy has no facts and a `decoy` kind (a
negation, the past, a wish, a hypothesis, a question, an idiom, another person's fact, reported
speech, a quote, the assistant, an instruction, a passing state or place: "I'm in Rome this
week"). A message is labelled with a single-valued fact only when it states it plainly: what
a careful reader would hesitate over is left out.

A statement matches a fact when:
- the fact is single-valued (it has a key): the statement has that fact_key and the value's
  words are in its triple's object or its description;
- the fact is not: the statement has no single-valued key of the corpus (a home or a job made
  of "my friend Oskar lives in Oslo" replaces the user's own) and the value's words are in its
  description ("The user's daughter Liv can't have peanuts" holds "Liv" and "peanuts").

Words are compared case- and accent-insensitively. A statement on a decoy is a false fact.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
LANGUAGES = ("en", "it", "fr", "de", "es")
# The single-valued facts the corpus labels: a new value of one replaces the old.
KEYS = frozenset({"name", "age", "home_city", "origin", "occupation", "employer", "studies"})
DECOY_KINDS = frozenset(
    {
        "negation",
        "past",
        "wish",
        "hypothetical",
        "question",
        "idiom",
        "other",
        "reported",
        "quote",
        "assistant",
        "instruction",
        "passing",
    }
)
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Fact:
    key: str  # one of KEYS, or "" for a fact of which there can be many
    value: str  # the words a memory of it must hold
    about: str = "user"  # "other": a relative's, a friend's or a pet's fact


@dataclass(frozen=True)
class Item:
    language: str
    text: str
    facts: tuple[Fact, ...]
    decoy: str = ""  # the kind of decoy, for a message that states nothing about the user


def corpus(languages: Iterable[str] = LANGUAGES) -> list[Item]:
    items = []
    for language in languages:
        data = yaml.safe_load((HERE / f"{language}.yaml").read_text(encoding="utf-8"))
        for entry in data["items"]:
            facts = tuple(
                Fact(key=fact["key"], value=str(fact["value"]), about=fact.get("about", "user"))
                for fact in entry["facts"]
            )
            items.append(
                Item(
                    language=language,
                    text=entry["text"],
                    facts=facts,
                    decoy=entry.get("decoy", ""),
                )
            )
    return items


def words(text: str) -> list[str]:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(char for char in decomposed if not unicodedata.combining(char))
    return _WORD.findall(plain)


def _holds(value: str, *texts: str) -> bool:
    found = {word for text in texts for word in words(text)}
    return all(word in found for word in words(value))


def matches(statement, fact: Fact) -> bool:
    if fact.key:
        target = statement.triple[1] if statement.triple else ""
        return statement.fact_key == fact.key and _holds(
            fact.value, str(target), statement.description
        )
    return statement.fact_key not in KEYS and _holds(fact.value, statement.description)


@dataclass
class Outcome:
    """What one message became: its statements, and which were right and which facts found."""

    item: Item
    statements: list
    false: list = field(init=False)
    missed: list[Fact] = field(init=False)

    def __post_init__(self) -> None:
        self.false = [
            statement
            for statement in self.statements
            if not any(matches(statement, fact) for fact in self.item.facts)
        ]
        self.missed = [
            fact
            for fact in self.item.facts
            if not any(matches(statement, fact) for statement in self.statements)
        ]


@dataclass
class Score:
    outcomes: list[Outcome]

    @property
    def single_valued(self) -> tuple[int, int]:
        """(right, predicted) of the statements with a single-valued fact_key."""
        keyed = [s for outcome in self.outcomes for s in outcome.statements if s.fact_key]
        wrong = sum(1 for outcome in self.outcomes for s in outcome.false if s.fact_key)
        return len(keyed) - wrong, len(keyed)

    @property
    def all_facts(self) -> tuple[int, int]:
        predicted = sum(len(outcome.statements) for outcome in self.outcomes)
        return predicted - sum(len(outcome.false) for outcome in self.outcomes), predicted

    @property
    def found(self) -> tuple[int, int]:
        gold = sum(len(outcome.item.facts) for outcome in self.outcomes)
        return gold - sum(len(outcome.missed) for outcome in self.outcomes), gold

    @property
    def single_valued_precision(self) -> float:
        return _ratio(*self.single_valued)

    @property
    def precision(self) -> float:
        return _ratio(*self.all_facts)

    @property
    def recall(self) -> float:
        return _ratio(*self.found)

    def figures(self) -> str:
        return (
            f"single-valued precision {self.single_valued_precision:.3f} "
            f"({'/'.join(map(str, self.single_valued))}), "
            f"precision {self.precision:.3f} ({'/'.join(map(str, self.all_facts))}), "
            f"recall {self.recall:.3f} ({'/'.join(map(str, self.found))})"
        )

    def false_facts(self) -> list[str]:
        return [
            f"[{outcome.item.language}] {outcome.item.text!r}"
            f"{f' ({outcome.item.decoy})' if outcome.item.decoy else ''}"
            f" -> {statement.fact_key or '-'}: {statement.description}"
            for outcome in self.outcomes
            for statement in outcome.false
        ]

    def misses(self) -> list[str]:
        return [
            f"[{outcome.item.language}] {outcome.item.text!r}: no {fact.key or 'fact'} "
            f"{fact.value!r}{' (about another person)' if fact.about == 'other' else ''}"
            f" among {[statement.description for statement in outcome.statements]}"
            for outcome in self.outcomes
            for fact in outcome.missed
        ]

    def report(self) -> str:
        lines = [self.figures(), "false facts:", *self.false_facts(), "misses:", *self.misses()]
        return "\n".join(lines)


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 1.0


def by_language(outcomes: list[Outcome]) -> dict[str, Score]:
    """A score per language and "all"."""
    scores = {
        language: Score([outcome for outcome in outcomes if outcome.item.language == language])
        for language in LANGUAGES
    }
    return {**scores, "all": Score(outcomes)}
