"""Whose words a proposed memory is: the user's, or an echo of what the assistant said or saw.

Texts are compared as casefolded word sequences, so case, whitespace, punctuation and the kind
of quote marks never matter. A memory "echoes" a text when most of its word trigrams occur in
it; it is "supported" by the user's message when that message holds it too, or holds every
word the memory adds to the text it echoes (an update of a remembered fact names the new value).
"""

from __future__ import annotations

import re

from apps.language.text import words

__all__ = ["containment", "echoes", "is_junk", "quote_found", "supported_by", "words"]

# A quote shorter than this is too common to prove anything, unless it is the whole message.
MIN_QUOTE_WORDS = 3
ECHO_CONTAINMENT = 0.6

_LETTER_WORD = re.compile(r"[^\W\d_]{2,}")
# Words every memory uses whatever its source ("The user's sister is Anna").
_FILLER = frozenset({"the", "user", "users", "s", "a", "an", "is", "are", "was", "and", "of"})


def _phrase(text_words: list[str]) -> str:
    return f" {' '.join(text_words)} "


def quote_found(*, quote: str, text: str) -> bool:
    """Is `quote` a real span of `text`: a few words at least, in order?"""
    quoted, said = words(quote), words(text)
    if not quoted or (len(quoted) < MIN_QUOTE_WORDS and quoted != said):
        return False
    return _phrase(quoted) in _phrase(said)


def _trigrams(text_words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(text_words[i : i + 3]) for i in range(len(text_words) - 2)}


def containment(text: str, source: str) -> float:
    """The share of `text`'s word trigrams found in `source` (1.0 for a contained phrase)."""
    text_words, source_words = words(text), words(source)
    if not text_words:
        return 0.0
    if _phrase(text_words) in _phrase(source_words):
        return 1.0
    trigrams = _trigrams(text_words)
    if not trigrams:
        return 0.0
    return len(trigrams & _trigrams(source_words)) / len(trigrams)


def echoes(text: str, source: str) -> bool:
    return containment(text, source) >= ECHO_CONTAINMENT


def supported_by(*, text: str, source: str, said: str) -> bool:
    """Does the user's message `said` carry what `text` says beyond the `source` it echoes?"""
    if echoes(text, said):
        return True
    added = set(words(text)) - set(words(source)) - _FILLER
    return bool(added) and added <= set(words(said))


def is_junk(text: str) -> bool:
    """Empty or placeholder text ("N/A", "string", "..."): fewer than two words of letters."""
    return len(_LETTER_WORD.findall(text)) < 2
