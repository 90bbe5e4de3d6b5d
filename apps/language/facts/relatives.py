"""The facts of a clause about a relative or pet of the user's: theirs, kept as the user's
relative's ("my friend Oskar lives in Oslo" is Oskar's home, never the user's)."""

from __future__ import annotations

import re

from apps.language.facts import slots
from apps.language.facts.clauses import Clause, Fact
from apps.language.facts.grammar import Frame, Grammar
from apps.language.facts.values import fact_of, original_value, other


def relative_facts(clause: Clause, grammar: Grammar, *, lowercase: bool) -> list[Fact] | None:
    """The facts of a clause about a relative or pet of the user's ("my daughter Liv can't have
    peanuts", "I have a dog called Rex"); None when the clause is about no relative, [] when
    it is but states nothing the rules know of them."""
    having = grammar.regex("having").match(clause.text)
    if having is not None:
        word = having.group("rel")
        relation = grammar.relations[word]
        name = slots.person_names(original_value(having.group("v"), clause), grammar)
        frame = Frame("relative_name", "")
        if name:
            return [Fact("relative_name", name, name, clause.original, grammar.code, frame,
                         relation, word, name)]  # fmt: skip
        return [Fact("relation", word, word, clause.original, grammar.code, None, relation, word)]
    start = re.match(
        rf"^{grammar.expand(grammar.possessive)}\s+(?P<rel>{grammar.relation_words})(?:s|es)?\b",
        clause.text,
    )
    if start is None:
        return None
    word = start.group("rel")
    relation = grammar.relations[word]
    rest = clause.text[start.end() :]
    tokens = rest.split()
    for size in (2, 1, 0):
        name = ""
        if size:
            if len(tokens) < size:
                continue
            candidate = original_value(" ".join(tokens[:size]), clause)
            name = slots.person_name(candidate, grammar, strength="relative")
            if not name or len(name.split()) != size:
                continue
        remainder = rest
        if size:
            remainder = rest[rest.lower().find(tokens[size - 1]) + len(tokens[size - 1]) :]
        if not remainder.strip():
            if name:
                frame = Frame("relative_name", "")
                return [Fact("relative_name", name, name, clause.original, grammar.code, frame,
                             relation, word, name)]  # fmt: skip
            continue
        sub = Clause(original=clause.original, text=remainder)
        for regex, frame in grammar.frames("other"):
            match = regex.match(remainder)
            if match is None:
                continue
            value = match.group("v") if match.group("v") is not None else other(match)
            fact = fact_of(frame, value, sub, grammar, match, lowercase=lowercase,
                         relation=relation, relation_word=word, relation_name=name)  # fmt: skip
            if fact is not None:
                return [fact]
        if name and _plain_statement(remainder, grammar):
            return [Fact("relation", name, name, clause.original, grammar.code, None, relation,
                         word, name)]  # fmt: skip
    return []


def _plain_statement(remainder: str, grammar: Grammar) -> bool:
    """A relative's clause the rules have no construction for, kept when it says plainly
    something of them: no negation, wish, past cue or words about the user ("me", "I")."""
    words = set(remainder.lower().split())
    return not (
        grammar.regex("negation").search(remainder)
        or grammar.regex("unreal").search(remainder)
        or grammar.regex("reported").search(remainder)
        or words & grammar.user_words
    )
