"""What a user's message states about the user, read by rules from the user's own words.

Reflection asks the model one small thing: which words of the user's messages state something
about the user. Everything else is decided here, without the model: the sentence a quote
points at, its clauses, the facts each states (apps.language.facts: constructions of the
user's language, values of the right kind, no negations, wishes, past or other people's facts),
their kind, topic, fact key, category and importance, their wording as a memory ("I live in
Turin" -> "The user lives in Turin", "vivo a Torino" -> "L'utente vive a Torino"), their
triple, and whether they hold only until tomorrow.

A quote only points: the memory is always made from the sentence of the user's message that
holds it, so a model that quotes two words of a name ("Laura Bianchi") still yields the user's
statement, and one that invents more than it quotes yields nothing it invented.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

from apps.cognition import grounding
from apps.language import facts as language_facts
from apps.language.english import third_person
from apps.language.facts.categories import category_of_words
from apps.language.facts.describe import TEMPLATES, description
from apps.language.text import sentences
from apps.memory.models import Category, MemoryNode
from apps.memory.quarantine import looks_like_instruction

__all__ = [
    "Statement",
    "category_allowed",
    "category_of_words",
    "message_statements",
    "quoted_sentences",
    "ruled_statements",
    "sentences",
    "statements_of",
    "states_something",
    "third_person",
]

# Shorter than this, a quote points at nothing in particular ("I", "yes").
MIN_POINTER_WORDS = 2
# A clause shorter than this ("I see", "I agree") says nothing worth a memory.
MIN_CLAUSE_WORDS = 3
DEFAULT_IMPORTANCE = 0.5
_TOPICS = {
    "occupation": "work",
    "employer": "work",
    "home": "home",
    "answers": "answers",
    "diet": "health",
    "health": "health",
}
# A clause whose subject is not the user is theirs only when it names something of theirs ("It
# is my birthday tomorrow"); "that is all for now", "she is seven" hold nothing on their own.
_THE_USERS = re.compile(r"\b(?:my|our)\b")


@dataclass(frozen=True)
class Statement:
    """One fact about the user, with the words of theirs it comes from."""

    description: str
    quote: str
    kind: str
    topic: str
    fact_key: str
    # None: neither a rule nor the words say what the fact is about (`category_of_words`).
    category: str | None
    importance: float
    # (predicate, object, category) of the triple (user, predicate, object), if a rule knows it.
    triple: tuple[str, str, str] | None = None
    valid_until: date | None = None
    # The language of the user's words, and of the description ("en", "it", "fr", "de", "es").
    language: str = "en"


def quoted_sentences(*, quote: str, text: str) -> list[str]:
    """The sentences of `text` that a model's quote points at: each sentence of the quote that
    is a span of `text` (two words at least) names the sentence of `text` holding it.

    A small model runs a quote on past the user's sentence ("We have a cat called Pepe, and he
    plays the violin…"): then the longest start of it, cut at a comma or a conjunction, that is
    a span of `text` (three words at least) names the sentence; what it ran on with is not
    taken.
    """
    found = []
    for part in sentences(quote) or [quote]:
        if len(grounding.words(part)) < MIN_POINTER_WORDS:
            continue
        sentence = _holding(part, text) or next(
            (
                held
                for start in _starts(part)
                if len(grounding.words(start)) >= MIN_CLAUSE_WORDS
                and (held := _holding(start, text))
            ),
            None,
        )
        if sentence is not None and sentence not in found:
            found.append(sentence)
    return found


_RUN_ON = re.compile(r"\s*[,;:]\s*|\s+(?:and|but|so|because|while)\s+", re.IGNORECASE)


def _starts(part: str) -> list[str]:
    """The starts of a quote that end at a comma or a conjunction, longest first."""
    cuts = [match.start() for match in _RUN_ON.finditer(part)]
    return [part[:cut] for cut in reversed(cuts) if cut > 0]


def _holding(part: str, text: str) -> str | None:
    """The sentence of `text` of which `part` is a span."""
    return next(
        (sentence for sentence in sentences(text) if grounding.containment(part, sentence) == 1.0),
        None,
    )


def is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?")


def states_something(text: str) -> bool:
    """Does the message state something about its writer: a clause that states a fact the
    rules place, or a first-person clause that is no question and no decoy ("I collect…")?"""
    language = language_facts.language_of(text)
    for sentence in sentences(text):
        for clause in language_facts.read(sentence, language=language):
            if clause.facts or (
                clause.first_person
                and not clause.decoy
                and not is_question(sentence)
                and len(grounding.words(clause.original)) >= MIN_CLAUSE_WORDS
            ):
                return True
    return False


def message_statements(
    text: str,
    *,
    today: date,
    language: str | None = None,
    known: dict[str, str] | None = None,
) -> list[Statement]:
    """The facts the rules alone place in a whole message of the user's, each once: what
    reflection learns from it whatever the model quotes. `language`: the message's, when the
    caller knows it (else it is told from the words). `known`: the user's current single
    values by fact key, which a correction ("actually it's Ghent, not Gent") replaces."""
    strict = language is not None
    language = language or language_facts.language_of(text)
    found: list[Statement] = []
    for sentence in sentences(text):
        for statement in ruled_statements(sentence, today=today, language=language,
                                          strict=strict):  # fmt: skip
            if statement not in found:
                found.append(statement)
    from apps.cognition.statements.corrections import corrected_statements, without_taken_back

    found = without_taken_back(text, found, today=today, language=language)
    if known:
        found.extend(corrected_statements(text, today=today, language=language, known=known))
    return found


def ruled_statements(
    sentence: str, *, today: date, language: str | None = None, strict: bool = False
) -> list[Statement]:
    """The facts of a sentence of the user's that a construction places ("I work as a
    carpenter", "my daughter Sofia is allergic to peanuts"): the user's own statement about
    themselves or theirs, whether or not a model pointed at it."""
    found = []
    for clause in language_facts.read(sentence, language=language, strict=strict):
        for fact in clause.facts:
            found.append(statement_of_fact(fact, today=today))
    return found


def statements_of(sentence: str, *, today: date, quote: str = "") -> list[Statement]:
    """The facts a sentence of the user's states: those a construction places, and, for the
    clauses none does, the clause itself in the third person, when it is the user's.

    A clause no construction places is the user's only with the user as its subject (in
    English also one naming something of theirs: "it is my birthday tomorrow"); "Plan a weekend
    in Porto", "that is all for now" never are, whatever the `quote`. Given the quote, such a
    clause counts when it is first-person or shares the quote's words. A clause that looks like
    a fact and is not (a negation, a wish, "call me later") never counts.
    """
    if is_question(sentence):
        return []
    if looks_like_instruction(sentence):
        # An order to the assistant is kept whole, as the user wrote it, for the write
        # services to hold for approval (apps.memory.quarantine): never read as a fact.
        return [_held(sentence, today=today)]
    quoted = set(grounding.words(quote))
    found = []
    for clause in language_facts.read(sentence):
        if clause.facts:
            found.extend(statement_of_fact(fact, today=today) for fact in clause.facts)
            continue
        if clause.decoy or len(grounding.words(clause.original)) < MIN_CLAUSE_WORDS:
            continue
        # Only a clause whose subject is the user is theirs: a model quotes other people's
        # news ("the new intern is 19"), stays ("I'm in Lyon this week") and orders to
        # the assistant as readily as the user's own facts (bench.fact_corpus: the model's
        # quotes alone were 0.63-0.73 precise when any quoted clause was kept).
        theirs = clause.first_person or (
            language_facts.language_of(sentence) in (None, "en") and _THE_USERS.search(clause.text)
        )
        # A first-person clause of a quoted sentence is the user's even when the quote
        # covered another clause of it (a small model quotes a part); another one needs the
        # quote's own words.
        pointed = clause.first_person or len(quoted & set(grounding.words(clause.text))) >= 2
        if not theirs or (quote and not pointed):
            continue
        statement = _unplaced(clause, sentence=sentence, today=today)
        if statement is not None:
            found.append(statement)
    return found


def _held(sentence: str, *, today: date) -> Statement:
    language = language_facts.language_of(sentence) or "en"
    text = sentence.strip().rstrip(".!…")
    described = (
        third_person(text) if language == "en" else TEMPLATES[language]["said"].format(c=text)
    )
    return Statement(
        description=described,
        quote=text,
        kind=MemoryNode.Kind.FACT,
        topic="",
        fact_key="",
        category=category_of_words(text),
        importance=DEFAULT_IMPORTANCE,
        valid_until=_valid_until(text.lower(), language=language, today=today),
        language=language,
    )


def _unplaced(clause, *, sentence: str, today: date) -> Statement | None:
    """A clause of the user's no construction places ("I collect old stamps"), kept in their
    words, unless it denies, wishes, plans or tells of the past ("I'm not a doctor", "I'd love
    to visit Japan", "I used to live in Paris")."""
    language = language_facts.language_of(sentence) or "en"
    grammar = language_facts.grammar_for(language)
    text = clause.text
    # Someone else's words about the user ("my colleague says I cook too hot") are theirs,
    # wherever in the sentence the saying is.
    if grammar.regex("reported").search(sentence.lower()) or any(
        grammar.regex(cue).search(text) for cue in ("negation", "unreal", "past", "passing")
    ):
        return None
    if language == "en":
        described = third_person(clause.original)
    else:
        described = TEMPLATES[language]["said"].format(c=clause.original)
    category = category_of_words(text)
    return Statement(
        description=described,
        quote=clause.original,
        kind=MemoryNode.Kind.FACT,
        topic="health" if category == Category.HEALTH else "",
        fact_key="",
        category=category,
        importance=DEFAULT_IMPORTANCE,
        valid_until=_valid_until(text, language=language, today=today),
        language=language,
    )


def statement_of_fact(fact: language_facts.Fact, *, today: date) -> Statement:
    """A fact the rules placed, as reflection stores it."""
    kind = language_facts.FACT_TYPES.get(fact.fact)
    relation = fact.relation
    if relation is None:
        topic = _TOPICS.get(fact.fact) or (
            fact.fact
            if kind and kind.fact_key
            else " ".join(fact.value.casefold().split()[:3]) or fact.fact
        )
        fact_key, category = kind.fact_key, kind.category
        triple = (kind.predicate, fact.value[:1000], kind.category)
        importance, memory_kind = kind.importance, kind.kind
    else:
        topic = "pets" if relation.pet else relation.key
        fact_key = (
            f"{relation.key}_name" if fact.fact == "relative_name" and not relation.pet else ""
        )
        category = Category.HEALTH if fact.fact in ("health", "diet") else Category.RELATIONSHIPS
        if relation.pet:
            triple = ("has_pet", relation.key, Category.RELATIONSHIPS)
        else:
            name = fact.value if fact.fact == "relative_name" else fact.relation_name
            triple = ("has_relative", f"{name} ({relation.key})" if name else relation.key,
                      Category.RELATIONSHIPS)  # fmt: skip
        importance = 0.6 if relation.pet else 0.7
        memory_kind = MemoryNode.Kind.FACT
    return Statement(
        description=description(fact),
        quote=fact.clause,
        kind=memory_kind,
        topic=topic[:200],
        fact_key=fact_key,
        category=category,
        importance=importance,
        triple=triple,
        valid_until=_valid_until(fact.clause.lower(), language=fact.language, today=today),
        language=fact.language,
    )


def category_allowed(category: str | None, *, allowed: set[str]) -> bool:
    """May a fact of this category be learnt? One of no category only when every one may."""
    if category is None:
        return allowed >= set(Category.values)
    return category in allowed


def _valid_until(text: str, *, language: str, today: date) -> date | None:
    """The last day of something true only for a while, when the words say which."""
    grammar = language_facts.grammar_for(language if language in TEMPLATES else "en")
    if grammar.regex("tomorrow").search(text):
        return today + timedelta(days=1)
    if grammar.regex("today").search(text):
        return today
    return None
