"""One engine for every language: a sentence's clauses, and the facts each states, read by the
language's tables (apps.language.facts.grammars.english, .italian…).

A clause states a fact only through a construction of its language whose value is of the
right kind (apps.language.facts.slots), said of the user in the present (no negation in its
value, no wish, condition or past for a fact the user has one of), or of a relative or pet of
theirs, which stays theirs ("my friend Oskar lives in Oslo" is Oskar's home, never the user's).
A clause a construction matched but whose value or cues failed is a decoy: it yields nothing.
"""

from __future__ import annotations

import re

from apps.language.facts.clauses import Clause, Fact
from apps.language.facts.grammar import EMPLOYER_BESIDE_A_JOB, Frame, Grammar
from apps.language.facts.relatives import had_relatives, mentioned_relatives, relative_facts
from apps.language.facts.values import fact_of, other
from apps.language.text import plain

__all__ = ["Clause", "Fact", "clauses_of"]

# Quotes of someone else's words, in double quotes or in single ones that no word's
# apostrophe opens ("my boss said 'I'm moving to Dubai'"): what they say is not the user's.
_QUOTED = re.compile(
    r"[\"“”«»„][^\"“”«»„]{2,}[\"“”«»„]|(?<!\w)['‘](?:[^'’]|(?<=\w)['’](?=\w))+\s(?:[^'’]|(?<=\w)['’](?=\w))+['’](?!\w)"
)


_NAME = r"[A-ZÀ-Þ][^\W\d_]*"
_TIME_LEAD = re.compile(r"^(?:since|from|da|dal|desde|seit|depuis)\s+\S+(?:\s+\d{4})?\s+")


def clauses_of(sentence: str, grammar: Grammar) -> list[Clause]:
    """The clauses of a sentence, each with the facts it states in `grammar`'s language."""
    text = _QUOTED.sub(" ", plain(sentence)).strip()
    question = text.rstrip().endswith("?")
    if question and (asked := grammar.regex("asked_back").search(text)) is not None:
        # What comes before the question asked back is said, not asked.
        text, question = text[: asked.start()], False
    text = text.strip().rstrip(".!?…").strip()
    # "my daughter, Liv, can't…", "two cats, Miso and Tofu": the names are the relative's.
    relation = rf"\b((?:{grammar.relation_words})s?)"
    text = re.sub(rf"{relation},\s+([^\W\d_]+),\s+", r"\1 \2 ", text, flags=re.I)
    text = re.sub(
        rf"{relation}\s*[,:]\s+(?=[^\W\d_]+(?:\s*(?:,|\(|$)|\s+\w+\s+[^\W\d_]+\s*(?:\(|$)))",
        r"\1 ",
        text,
        flags=re.I,
    )
    # "… Katzen Luna, Felix und Motte": a list of names is one clause (no space after its
    # commas, where clauses part).
    text = re.sub(
        rf"(?i:{relation})\s+({_NAME}(?:\s*,\s*{_NAME})+)",
        lambda m: f"{m[1]} " + re.sub(r"\s*,\s*", ",", m[2]),
        text,
    )
    lowercase_message = text == text.lower()
    found = []
    parts = [
        piece
        for part in re.split(grammar.regex("clause_breaks"), text)
        if part and part.strip()
        for piece in _after_colon(part, grammar)
    ]
    unreal_sentence = bool(parts) and _opens_with(grammar, "conditional", parts[0])
    listing = False
    for part in parts:
        clause = _clause(part, grammar)
        if clause is None:
            continue
        clause.sentence = text.lower()
        listing = listing or bool(re.match(rf"^{grammar.expand(grammar.having)}\b", clause.text))
        if not unreal_sentence:
            _read(clause, grammar, question=question, lowercase=lowercase_message, listing=listing)
        else:
            clause.decoy = True
        found.append(clause)
    _fragments_in_context(found)
    _places_over_nationalities(found)
    return found


def _places_over_nationalities(clauses: list[Clause]) -> None:
    """ "je suis belge, de Liège": the origin is the place; the nationality says less."""
    origins = [f for clause in clauses for f in clause.facts if f.fact == "origin" and f.of_user]
    if any(f.frame is not None and f.frame.template != "demonym" for f in origins):
        for clause in clauses:
            clause.facts = [
                f
                for f in clause.facts
                if not (f.frame is not None and f.frame.template == "demonym")
            ]


def _after_colon(part: str, grammar: Grammar) -> list[str]:
    """ "sorry, my mistake: I live in Lecce" is two clauses; "work-wise: nurse" one."""
    head, colon, rest = part.partition(":")
    if colon and grammar.regex("first_person").match(rest.strip().lower()):
        return [head, rest]
    return [part]


def _fragments_in_context(clauses: list[Clause]) -> None:
    """A fragment ("33", "accountant", "Anh") says something of the user only in a sentence
    that introduces them: beside a fact stated in full, or with other fragments of other
    types ("Anh, 26, UX designer")."""
    facts = [fact for clause in clauses for fact in clause.facts if fact.of_user]
    fragments = [fact for fact in facts if fact.frame is not None and fact.frame.fragment]
    # A name opens an introduction ("Anh, 26, UX designer"), and a fragment says nothing a
    # construction of the sentence already said.
    first = [fact for clause in clauses[:1] for fact in clause.facts]
    stated = {fact.fact for fact in facts if fact not in fragments}
    dropped = [
        fact
        for fact in fragments
        if (fact.fact == "name" and fact not in first) or fact.fact in stated
    ]
    for clause in clauses:
        clause.facts = [fact for fact in clause.facts if fact not in dropped]
    facts = [fact for fact in facts if fact not in dropped]
    fragments = [fact for fact in fragments if fact not in dropped]
    whole = len(facts) > len(fragments)
    if not fragments or whole or len({fact.fact for fact in fragments}) >= 2:
        return
    for clause in clauses:
        clause.facts = [fact for fact in clause.facts if fact not in fragments]


def _opens_with(grammar: Grammar, cue: str, part: str) -> bool:
    head = " ".join(part.lower().split()[:2])
    found = grammar.regex(cue).search(head)
    return found is not None and found.start() == 0


def _clause(part: str, grammar: Grammar) -> Clause | None:
    original = part.strip(" ,;:-–—")
    lowered = original.lower()
    opener = grammar.regex("openers").match(lowered)
    if opener and len(lowered) == len(original):
        original, lowered = original[opener.end() :], lowered[opener.end() :]
    original = original.strip(" ,;:-–—")
    # "sorry, I meant I live in Ghent": what it takes back was said before; the rest is said.
    taking_back = grammar.regex("takes_back").match(original)
    if taking_back is not None and taking_back.end() < len(original):
        original = original[taking_back.end() :]
    closer = grammar.regex("closers").search(original)
    if closer is not None and closer.start() > 0:
        original = original[: closer.start()].strip(" ,;:-–—")
    if not original:
        return None
    text = _normal(original.lower(), grammar)
    # "since May I work at Zara", "da settembre lavoro in Lamborghini": a time before the user.
    lead = _TIME_LEAD.match(text)
    if lead and grammar.regex("first_person").match(text[lead.end() :]):
        text = text[lead.end() :]
        typed = _TIME_LEAD.match(original.lower())
        original = original[typed.end() :] if typed else original
    first = grammar.regex("first_person").match(text) if grammar.first_person else None
    return Clause(original=original, text=text, first_person=first is not None)


def _standing(clause: Clause, grammar: Grammar) -> bool:
    """A request about answers holds for every later one: said so ("from now on"), or asked
    of the answers in general."""
    return bool(
        grammar.regex("standing").search(clause.sentence)
        or grammar.regex("every_answer").search(clause.text)
    )


def _normal(text: str, grammar: Grammar) -> str:
    for pattern, replacement in grammar.normal:
        text = re.sub(pattern, replacement, text)
    return " ".join(text.split())


def _read(
    clause: Clause, grammar: Grammar, *, question: bool, lowercase: bool, listing: bool
) -> None:
    if not question:
        clause.facts.extend(mentioned_relatives(clause, grammar))
    relative = relative_facts(clause, grammar, lowercase=lowercase)
    if relative is not None:
        clause.facts.extend(relative)
        clause.decoy = not relative
        return
    had = [] if question else had_relatives(clause, grammar, listing=listing)
    for regex, frame in grammar.frames("user"):
        match = regex.match(clause.text)
        if match is None:
            continue
        if question and frame.fact != "answers":
            clause.decoy = True
            return
        value_text = match.group("v") if match.group("v") is not None else other(match)
        if frame.template == "request" and not _standing(clause, grammar):
            continue
        if frame.fragment and had:
            break
        fact = fact_of(frame, value_text, clause, grammar, match, lowercase=lowercase)
        # "trabajo en Madrid como profesor": no employer (a town), the job still stated.
        besides = _besides(match, clause, grammar, lowercase=lowercase)
        if fact is not None or any(beside.fact == "occupation" for beside in besides):
            if fact is not None:
                clause.facts.append(fact)
            clause.facts.extend(besides)
            clause.facts.extend(had)
            clause.decoy = False
            return
        clause.decoy = clause.decoy or frame.decoy
    clause.facts.extend(had)
    if had:
        clause.decoy = False
    if question:
        clause.decoy = True


# A construction may state a second fact in a group of its own: "I work for the city council
# as a gardener" (employer, then "job"), "I work as a nurse at St Mary's" (then "org").
_BESIDES = {"job": Frame("occupation", "", explicit=True), "org": EMPLOYER_BESIDE_A_JOB}


def _besides(match: re.Match, clause: Clause, grammar: Grammar, *, lowercase: bool) -> list[Fact]:
    found = []
    for group, frame in _BESIDES.items():
        value = match.groupdict().get(group)
        if value:
            fact = fact_of(frame, value, clause, grammar, match, lowercase=lowercase)
            if fact is not None:
                found.append(fact)
    return found
