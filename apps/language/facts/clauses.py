"""A clause of a user's sentence and the facts it states: what the engine reads and keeps."""

from __future__ import annotations

from dataclasses import dataclass, field

from apps.language.facts.grammar import Frame, Relation


@dataclass(frozen=True)
class Fact:
    fact: str  # a key of FACT_TYPES, or "relation" (a relative or pet, nothing more known)
    value: str  # the triple's object: "Bergen", "nurse", "Liv"
    phrase: str  # the value as the description says it: "a small village near Bergen"
    clause: str  # the clause in the user's spelling, openers removed
    language: str
    frame: Frame | None = None
    relation: Relation | None = None
    relation_word: str = ""  # as typed: "mum", "figlia"
    relation_name: str = ""  # "Liv"

    @property
    def of_user(self) -> bool:
        return self.relation is None


@dataclass
class Clause:
    original: str  # the user's spelling, openers removed
    text: str  # lower case, normalised
    facts: list[Fact] = field(default_factory=list)
    # A construction matched but its value or cues made it no fact: keep nothing of it.
    decoy: bool = False
    first_person: bool = False
    # The whole sentence, lower case: a request may be marked standing anywhere in it.
    sentence: str = ""
