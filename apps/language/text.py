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


# What no reader sees but a model reads: C0 and C1 controls but the tab and the newline, the
# soft hyphen, zero-width characters and joiners, bidi marks, embeddings, overrides and
# isolates, invisible operators, the byte-order mark, interlinear annotation marks, the tag
# characters (U+E0000–E007F, which spell hidden ASCII) and the variation-selector supplement
# (which can carry hidden bytes): every Cc and Cf character of Unicode 14, and those selectors.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)
_LINE_BREAKS = re.compile("\r\n?|[\u2028\u2029\x85]")


def visible(text: str) -> str:
    """`text` without the characters a reader cannot see (`_INVISIBLE`), its line breaks made
    plain newlines. Every door where text enters (a chat message, an import, an MCP call, a
    memory browser edit, a tool's result) passes it through this: hidden characters can carry
    an instruction the user never saw, or split a word so that no rule recognises it."""
    return _INVISIBLE.sub("", _LINE_BREAKS.sub("\n", text))
