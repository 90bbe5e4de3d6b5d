"""Sentences and words: the one splitter and the one tokenizer of the project."""

from __future__ import annotations

import re

# A sentence ends at . ! ? … followed by space, or at a line break.
_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\n+")
# Words: runs of letters, digits or underscores (the tokenizer every comparison of texts uses).
_WORD = re.compile(r"\w+")
# Words of letters with an inner apostrophe ("don't", "l'utente"), for what a reader would
# call a word: no digits, no underscores.
_LETTER_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "`": "'", "´": "'"})


def plain(text: str) -> str:
    """`text` with its typographic apostrophes made straight: "I’m" -> "I'm"."""
    return text.translate(_APOSTROPHES)


# A full stop after these ends no sentence: "FC St. Pauli", "Dr. Rossi".
_ABBREVIATION = re.compile(r"(?:^|\s)(?:st|dr|mr|mrs|ms|prof|sig|jr|sr|vs|ca|bzw|nr|str)\.$", re.I)


def sentences(text: str) -> list[str]:
    """The sentences of `text`, stripped, without empty ones."""
    found: list[str] = []
    for part in _SENTENCE.split(text):
        part = part.strip()
        if not part:
            continue
        if found and _ABBREVIATION.search(found[-1]):
            found[-1] = f"{found[-1]} {part}"
        else:
            found.append(part)
    return found


def words(text: str) -> list[str]:
    """The casefolded words of `text` (letters, digits, underscores), in order."""
    return _WORD.findall(text.casefold())


def letter_words(text: str) -> list[str]:
    """The words of `text` as written (letters, with an inner apostrophe), in order."""
    return _LETTER_WORD.findall(text)


def word_set(text: str) -> frozenset[str]:
    """The words of a word list written as text, one space or line apart."""
    return frozenset(text.split())
