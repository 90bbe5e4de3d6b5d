"""Whether a memory's description says no more than the user's words it quotes.

A memory marked as the user's own (source "user") carries the words it came from. Its
description may turn them into the third person ("I live in Turin" -> "The user lives in
Turin") but must add no word of its own: every content word of the description is in the quote,
give or take an inflection ("live"/"lives", "study"/"studies").
"""

from __future__ import annotations

import re

from apps.language import facts as language_facts
from apps.language.facts.describe import TEMPLATE_WORDS
from apps.language.facts.describe import description as described
from apps.language.text import sentences as split_sentences

_WORD = re.compile(r"\w+")
# A template's negation ("does not eat {v}") is never a frame word: a description that denies
# must have its denial from the quote.
_NEGATIONS = frozenset(
    ["not", "no", "never", "non", "pas", "ne", "n", "jamais", "nicht", "kein", "keine", "nie"]
    + ["mai", "nunca", "ni"]
)
# The words the third person adds to any quote: pronouns, the user, auxiliaries, articles;
# and those of the five languages' description templates ("L'utente vive a Torino").
_FRAME = frozenset(
    {
        "the", "user", "users", "s", "their", "theirs", "them", "themselves", "they",
        "is", "are", "was", "were", "has", "have", "had", "does", "do", "did",
        "would", "will", "can", "a", "an", "and", "of",
    }
) | (TEMPLATE_WORDS - _NEGATIONS)  # fmt: skip


def _forms(word: str) -> set[str]:
    forms = {word}
    if word.endswith("ies") and len(word) > 4:
        forms.add(word[:-3] + "y")
    if word.endswith("es") and len(word) > 3:
        forms.add(word[:-2])
    if word.endswith("s") and len(word) > 2:
        forms.add(word[:-1])
    return forms


def quote_supports(*, description: str, quote: str) -> bool:
    """Does every content word of `description` come from `quote`, or is it what the rules
    make of the quote ("I gave up meat" -> "The user does not eat meat")?"""
    if quote and description in _rules_reading(quote):
        return True
    quoted: set[str] = set()
    for word in _WORD.findall(quote.casefold()):
        quoted |= _forms(word)
    # A negation must be the quote's own: "don't" gives "not", "I like" does not.
    if quoted & {"t", "no", "never", "cannot"}:
        quoted.add("not")
    added = [word for word in _WORD.findall(description.casefold()) if word not in _FRAME]
    return all(_forms(word) & quoted for word in added)


def _rules_reading(quote: str) -> set[str]:
    """The descriptions the statement rules write for the facts `quote` states."""
    return {
        described(fact)
        for sentence in split_sentences(quote)
        for clause in language_facts.read(sentence)
        for fact in clause.facts
    }
