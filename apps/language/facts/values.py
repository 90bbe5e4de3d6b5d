"""A construction's value checked for its kind and its cues, made a fact (or not)."""

from __future__ import annotations

import re

from apps.language import places
from apps.language.facts import slots
from apps.language.facts.clauses import Clause, Fact
from apps.language.facts.grammar import (
    EMPLOYER_BESIDE_A_JOB,
    FACT_TYPES,
    SINGLE_VALUED,
    Frame,
    Grammar,
    Relation,
)


def other(match: re.Match) -> str:
    return next(
        (value for key, value in match.groupdict().items() if value and key.startswith("v")), ""
    )


def original_value(value: str, clause: Clause) -> str:
    """`value` (from the lower-case clause) in the user's spelling."""
    at = clause.original.lower().rfind(value)
    if at >= 0:
        return clause.original[at : at + len(value)]
    return value


def fact_of(
    frame: Frame,
    value: str,
    clause: Clause,
    grammar: Grammar,
    match: re.Match,
    *,
    lowercase: bool,
    relation: Relation | None = None,
    relation_word: str = "",
    relation_name: str = "",
) -> Fact | None:
    if not value:
        return None
    typed = original_value(value.strip(), clause)
    checked = slots.cut(value, grammar)
    if grammar.regex("negation").search(checked) and frame.fact not in ("diet",):
        return None
    single = frame.fact in SINGLE_VALUED
    if single and (
        grammar.regex("past").search(clause.text) or grammar.regex("passing").search(clause.text)
    ):
        return None
    # "ich wäre gern Pilot", "I would love to be a pilot": a wish, in the value or before it.
    before = clause.text[: max(clause.text.find(value.strip().lower()), 0)]
    unreal = grammar.regex("unreal")
    if (unreal.search(checked) or unreal.search(before)) and frame.fact != "answers":
        return None
    found, phrase = _slot(frame, typed, grammar, relation=relation, lowercase=lowercase,
                          at_start=clause.text.startswith(value))  # fmt: skip
    if not found:
        return None
    return Fact(
        fact=frame.fact,
        value=found,
        phrase=phrase or found,
        clause=clause.original,
        language=grammar.code,
        frame=frame,
        relation=relation,
        relation_word=relation_word,
        relation_name=relation_name,
    )


def _slot(
    frame: Frame, typed: str, grammar: Grammar, *, relation, lowercase: bool, at_start: bool
) -> tuple[str, str]:
    kind = FACT_TYPES[frame.fact].slot
    if kind == "name" and relation is not None:
        return slots.person_names(typed, grammar), ""
    if kind == "name" and frame.template == "here":
        # "Hauke here", "Maëlle ici": the name opens the clause, capitalised by its writer.
        return slots.person_name(typed, grammar, strength="weak"), ""
    if kind == "name" and frame.template == "demonym":
        return "", ""
    if kind == "name":
        return slots.person_name(
            typed, grammar, strength=_strength(frame, relation), at_start=at_start
        ), ""
    if frame.template == "demonym":
        return slots.demonym(typed, grammar), ""
    if kind == "place":
        return slots.place(typed, grammar, lowercase_message=lowercase)
    if kind == "age":
        return slots.age(typed.strip(), of_user=relation is None), ""
    if kind == "job":
        if frame.template == "teach":
            return slots.taught(typed, grammar), ""
        if frame.template == "field":
            return slots.field(typed, grammar), ""
        return slots.job(typed, grammar, explicit=frame.explicit), ""
    if kind == "org":
        organisation = slots.organisation(typed, grammar)
        return ("" if _where_not_who(organisation, frame) else organisation), ""
    if kind == "subject":
        return slots.subject(typed, grammar), ""
    if kind == "language":
        return slots.spoken_languages(typed, grammar), ""
    if kind == "thing":
        return slots.thing(typed, grammar), ""
    if kind == "style":
        return _style(typed, grammar), ""
    if kind == "diet":
        return (slots.food(typed, grammar) or _diet_word(typed, grammar)), ""
    return slots.condition(typed, grammar), ""


# A town this large, named alone where an employer could be, is where the user works; a smaller
# one may be a firm's name too (Zara, Orange and Mango are towns of 60,000-230,000 people).
WORKS_IN_TOWN = 300_000


def _where_not_who(organisation: str, frame: Frame) -> bool:
    """Does this employer name a place, where the user works rather than for whom ("soy
    dentista en Málaga", "trabajo en Madrid")? Beside a job in its construction, or in a
    fragment that introduces the user, any town in the lexicon does ("soy profesora en
    Granada"; "soy cajera en Zara" is then missed, which is better than a wrong employer);
    alone, a large town or a country. An acronym never does ("SAP" is also another name of a
    city)."""
    if not organisation or organisation.isupper():
        return False
    people = places.population(organisation)
    beside_a_job = frame is EMPLOYER_BESIDE_A_JOB or frame.fragment
    return people >= (1 if beside_a_job else WORKS_IN_TOWN)


def _strength(frame: Frame, relation: Relation | None) -> str:
    if frame.template == "weak":
        return "weak"
    return "strong" if relation is None else "relative"


def _diet_word(typed: str, grammar: Grammar) -> str:
    word = typed.split()[0].strip(",.") if typed.split() else ""
    return word if grammar.regex("diets").fullmatch(word.lower()) else ""


_POLITE = re.compile(
    r"(?:,?\s+(?:please|pls|plz|thanks|thank you|per favore|grazie|s'il te plaît|s'il vous plaît"
    r"|stp|svp|merci|bitte|danke|por favor|porfa|gracias))+$"
)


def _style(typed: str, grammar: Grammar) -> str:
    """How the user wants every later answer: only a standing request ("from now on",
    "always") or a stated preference for a kind of answers counts."""
    standing = grammar.regex("standing")
    style = standing.sub("", typed.lower()).strip(" ,.!?")
    style = _POLITE.sub("", style).strip(" ,")
    if not style or len(style.split()) > 8:
        return ""
    return original_value(style, Clause(original=typed, text=typed.lower())) if style else ""
