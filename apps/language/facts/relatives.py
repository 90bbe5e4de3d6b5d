"""The facts of a clause about a relative or pet of the user's: theirs, kept as the user's
relative's ("my friend Oskar lives in Oslo" is Oskar's home, never the user's).

Three ways people name them: with a possessive ("my daughter Liv can't have peanuts", "my
kids are Noa and Eli", "mes deux chats : Pixel et Nougat"), by having them ("I have a dog
called Rex", "ho 45 anni, due figli e un cane di nome Briciola", "zwei Kinder: Ben und Mia"),
and in passing ("je vis à Genève avec mon mari Hugo").
"""

from __future__ import annotations

import re

from apps.language.facts import slots
from apps.language.facts.clauses import Clause, Fact
from apps.language.facts.grammar import Frame, Grammar
from apps.language.facts.values import fact_of, original_value, other

_NAMED = Frame("relative_name", "")
# People of the user's working or social life: what they do is their news, not the user's
# ("my colleague Sabine is moving to Lindau"); only a construction of a known fact is kept.
_NOT_FAMILY = frozenset({"friend", "colleague", "boss", "roommate"})
_AND = r"(?:,|\band\b|\be\b|\bed\b|\bet\b|\bund\b|\by\b|&)"


def relative_facts(clause: Clause, grammar: Grammar, *, lowercase: bool) -> list[Fact] | None:
    """The facts of a clause about a relative or pet of the user's; None when the clause is
    about none, [] when it is but states nothing the rules know of them."""
    start = re.match(
        rf"^{grammar.expand(grammar.possessive)}\s+(?:{grammar.expand(grammar.counted)}\s+)?"
        rf"(?P<rel>{grammar.relation_words})(?:s|es)?\b",
        clause.text,
    )
    if start is None:
        return None
    word = start.group("rel")
    rest = clause.text[start.end() :]
    listed = slots.person_names(original_value(rest.strip(" :,"), clause), grammar)
    if listed and re.search(_AND, rest):
        return [_named(clause, grammar, word, listed)]
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
                return [_named(clause, grammar, word, name)]
            continue
        fact = _said_of(clause, grammar, word, name, remainder, lowercase=lowercase)
        if fact is not None:
            return [fact]
        if (
            name
            and grammar.relations[word].key not in _NOT_FAMILY
            and _plain_statement(remainder, grammar)
        ):
            return [Fact("relation", name, name, clause.original, grammar.code, None,
                         grammar.relations[word], word, name)]  # fmt: skip
    return []


def _said_of(clause: Clause, grammar: Grammar, word: str, name: str, remainder: str, *,
             lowercase: bool) -> Fact | None:  # fmt: skip
    """The fact a construction in the third person states of the relative: "… lives in Oslo",
    "… is allergic to eggs", "… si chiama Sofia"."""
    sub = Clause(original=clause.original, text=remainder)
    for regex, frame in grammar.frames("other"):
        match = regex.match(remainder)
        if match is None:
            continue
        value = match.group("v") if match.group("v") is not None else other(match)
        fact = fact_of(frame, value, sub, grammar, match, lowercase=lowercase,
                       relation=grammar.relations[word], relation_word=word,
                       relation_name=name)  # fmt: skip
        if fact is not None:
            return fact
    return None


def had_relatives(clause: Clause, grammar: Grammar, *, listing: bool = False) -> list[Fact]:
    """The relatives and pets a clause says the user has: after the verb ("I have a dog called
    Rex", "tengo 63 años y tres nietos"), or, `listing` on from a clause that had it, without
    one ("…, due figli e un cane di nome Briciola"); a count of two or more needs no verb
    ("zwei Kinder: Ben und Mia")."""
    text = clause.text
    verb = re.match(rf"^{grammar.expand(grammar.having)}\b", text)
    counted = re.match(rf"^{grammar.expand(grammar.counted)}\s", text)
    if verb is None and counted is None and not listing:
        return []
    one = (
        rf"(?:{grammar.expand(grammar.numbers)})\s+(?P<rel>{grammar.relation_words})(?:s|es|i|e)?\b"
    )
    found = []
    starts = list(re.finditer(rf"(?:^|{_AND}\s*|\b{grammar.expand(grammar.having)}\s+){one}", text))
    for index, match in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        word = match.group("rel")
        rest = text[match.end() : end]
        rest = re.sub(rf"^\s*[,:]?\s*(?:{grammar.expand(grammar.naming)})?\s*", "", rest)
        name = (
            slots.person_names(original_value(rest.strip(" ,:"), clause), grammar)
            if rest.strip(" ,:")
            else ""
        )
        if name:
            found.append(_named(clause, grammar, word, name))
        elif not rest.strip(" ,:") or re.fullmatch(rf"\s*{_AND}?\s*", rest):
            found.append(Fact("relation", word, word, clause.original, grammar.code, None,
                              grammar.relations[word], word))  # fmt: skip
    return found


def mentioned_relatives(clause: Clause, grammar: Grammar) -> list[Fact]:
    """Relatives named in passing: "… avec mon mari Hugo", "… with my wife Ana"."""
    found = []
    pattern = (
        rf"\b(?:{grammar.with_words})\s+{grammar.expand(grammar.possessive)}\s+"
        rf"(?P<rel>{grammar.relation_words})\s+(?P<v>[^\s,.;!?]+(?:\s+[^\s,.;!?]+)?)"
    )
    for match in re.finditer(pattern, clause.text):
        for size in (2, 1):
            candidate = " ".join(match.group("v").split()[:size])
            name = slots.person_name(original_value(candidate, clause), grammar,
                                     strength="relative")  # fmt: skip
            if name and len(name.split()) == size:
                found.append(_named(clause, grammar, match.group("rel"), name))
                break
    return found


def _named(clause: Clause, grammar: Grammar, word: str, name: str) -> Fact:
    return Fact("relative_name", name, name, clause.original, grammar.code, _NAMED,
                grammar.relations[word], word, name)  # fmt: skip


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
