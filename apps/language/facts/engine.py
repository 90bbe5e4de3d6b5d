"""One engine for every language: a sentence's clauses, and the facts each states, read by the
language's tables (apps.language.facts.english, .italian…).

A clause states a fact only through a construction of its language whose value is of the
right kind (apps.language.facts.slots), said of the user in the present (no negation in its
value, no wish, condition or past for a fact the user has one of), or of a relative or pet of
theirs, which stays theirs ("my friend Oskar lives in Oslo" is Oskar's home, never the user's).
A clause a construction matched but whose value or cues failed is a decoy: it yields nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apps.language.facts import slots
from apps.language.facts.grammar import FACT_TYPES, SINGLE_VALUED, Frame, Grammar, Relation
from apps.language.text import plain

# Quotes of someone else's words, in double quotes or in single ones that no word's
# apostrophe opens ("my boss said 'I'm moving to Dubai'"): what they say is not the user's.
_QUOTED = re.compile(
    r"[\"“”«»„][^\"“”«»„]{2,}[\"“”«»„]|(?<!\w)['‘](?:[^'’]|(?<=\w)['’](?=\w))+\s(?:[^'’]|(?<=\w)['’](?=\w))+['’](?!\w)"
)


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


def clauses_of(sentence: str, grammar: Grammar) -> list[Clause]:
    """The clauses of a sentence, each with the facts it states in `grammar`'s language."""
    text = _QUOTED.sub(" ", plain(sentence)).strip()
    question = text.rstrip().endswith("?")
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
    lowercase_message = text == text.lower()
    found = []
    parts = [
        part for part in re.split(grammar.regex("clause_breaks"), text) if part and part.strip()
    ]
    unreal_sentence = bool(parts) and _opens_with(grammar, "conditional", parts[0])
    for part in parts:
        clause = _clause(part, grammar)
        if clause is None:
            continue
        if not unreal_sentence:
            _read(clause, grammar, question=question, lowercase=lowercase_message)
        else:
            clause.decoy = True
        found.append(clause)
    _fragments_in_context(found)
    return found


def _fragments_in_context(clauses: list[Clause]) -> None:
    """A fragment ("33", "accountant", "Anh") says something of the user only in a sentence
    that introduces them: beside a fact stated in full, or with other fragments of other
    types ("Anh, 26, UX designer")."""
    facts = [fact for clause in clauses for fact in clause.facts if fact.of_user]
    fragments = [fact for fact in facts if fact.frame is not None and fact.frame.fragment]
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
    if not original:
        return None
    text = _normal(original.lower(), grammar)
    first = grammar.regex("first_person").match(text) if grammar.first_person else None
    return Clause(original=original, text=text, first_person=first is not None)


def _normal(text: str, grammar: Grammar) -> str:
    for pattern, replacement in grammar.normal:
        text = re.sub(pattern, replacement, text)
    return " ".join(text.split())


def _read(clause: Clause, grammar: Grammar, *, question: bool, lowercase: bool) -> None:
    relative = _relative(clause, grammar, lowercase=lowercase)
    if relative is not None:
        if relative:
            clause.facts.extend(relative)
        else:
            clause.decoy = True
        return
    for regex, frame in grammar.frames("user"):
        match = regex.match(clause.text)
        if match is None:
            continue
        if question and frame.fact != "answers":
            clause.decoy = True
            return
        value_text = match.group("v") if match.group("v") is not None else _other(match)
        if frame.template == "request" and not grammar.regex("standing").search(clause.text):
            continue
        fact = _fact(frame, value_text, clause, grammar, match, lowercase=lowercase)
        if fact is not None:
            clause.facts.append(fact)
            clause.facts.extend(_besides(match, clause, grammar, lowercase=lowercase))
            clause.decoy = False
            return
        clause.decoy = clause.decoy or frame.decoy
    if question:
        clause.decoy = True


# A construction may state a second fact in a group of its own: "I work for the city council
# as a gardener" (employer, then "job"), "I work as a nurse at St Mary's" (then "org").
_BESIDES = {"job": Frame("occupation", "", explicit=True), "org": Frame("employer", "")}


def _besides(match: re.Match, clause: Clause, grammar: Grammar, *, lowercase: bool) -> list[Fact]:
    found = []
    for group, frame in _BESIDES.items():
        value = match.groupdict().get(group)
        if value:
            fact = _fact(frame, value, clause, grammar, match, lowercase=lowercase)
            if fact is not None:
                found.append(fact)
    return found


def _other(match: re.Match) -> str:
    return next(
        (value for key, value in match.groupdict().items() if value and key.startswith("v")), ""
    )


def _original_value(value: str, clause: Clause) -> str:
    """`value` (from the lower-case clause) in the user's spelling."""
    at = clause.original.lower().rfind(value)
    if at >= 0:
        return clause.original[at : at + len(value)]
    return value


def _fact(
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
    typed = _original_value(value.strip(), clause)
    checked = slots.cut(value, grammar)
    if grammar.regex("negation").search(checked) and frame.fact not in ("diet",):
        return None
    single = frame.fact in SINGLE_VALUED
    if single and (
        grammar.regex("past").search(clause.text) or grammar.regex("passing").search(clause.text)
    ):
        return None
    if grammar.regex("unreal").search(checked) and frame.fact != "answers":
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
    if kind == "name":
        return slots.person_name(
            typed, grammar, strength=_strength(frame, relation), at_start=at_start
        ), ""
    if kind == "place":
        return slots.place(typed, grammar, lowercase_message=lowercase)
    if kind == "age":
        return slots.age(typed.strip(), of_user=relation is None), ""
    if kind == "job":
        if frame.template == "teach":
            return slots.taught(typed, grammar), ""
        return slots.job(typed, grammar, explicit=frame.explicit), ""
    if kind == "org":
        return slots.organisation(typed, grammar), ""
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


def _strength(frame: Frame, relation: Relation | None) -> str:
    if frame.template == "weak":
        return "weak"
    return "strong" if relation is None else "relative"


def _diet_word(typed: str, grammar: Grammar) -> str:
    word = typed.split()[0].strip(",.") if typed.split() else ""
    return word if grammar.regex("diets").fullmatch(word.lower()) else ""


def _style(typed: str, grammar: Grammar) -> str:
    """How the user wants every later answer: only a standing request ("from now on",
    "always") or a stated preference for a kind of answers counts."""
    standing = grammar.regex("standing")
    style = standing.sub("", typed.lower()).strip(" ,.!?")
    style = re.sub(r"\s+(?:please|pls|thanks|thank you)$", "", style).strip(" ,")
    if not style or len(style.split()) > 8:
        return ""
    return _original_value(style, Clause(original=typed, text=typed.lower())) if style else ""


def _relative(clause: Clause, grammar: Grammar, *, lowercase: bool) -> list[Fact] | None:
    """The facts of a clause about a relative or pet of the user's ("my daughter Liv can't have
    peanuts", "I have a dog called Rex"); None when the clause is about no relative, [] when
    it is but states nothing the rules know of them."""
    having = grammar.regex("having").match(clause.text)
    if having is not None:
        word = having.group("rel")
        relation = grammar.relations[word]
        name = slots.person_names(_original_value(having.group("v"), clause), grammar)
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
            candidate = _original_value(" ".join(tokens[:size]), clause)
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
            value = match.group("v") if match.group("v") is not None else _other(match)
            fact = _fact(frame, value, sub, grammar, match, lowercase=lowercase,
                         relation=relation, relation_word=word, relation_name=name)  # fmt: skip
            if fact is not None:
                return [fact]
            return []
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
