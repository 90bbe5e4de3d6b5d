"""Dictionary forms and dictionary words, per language, from simplemma.

Each language's dictionary is loaded at its first use, in that process only (English about
50 MB and 0.4 s, German about 3 s): a process that never reads German never loads it.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()


def _dictionary(language: str) -> dict[str, str]:
    from simplemma.strategies import DEFAULT_DICTIONARY_FACTORY

    with _lock:  # simplemma's factory caches; one thread loads a language at a time
        return DEFAULT_DICTIONARY_FACTORY.get_dictionary(language)


def lemma(word: str, *, language: str) -> str:
    """The dictionary form of `word` in `language` ("went" -> "go"), or the word itself."""
    import simplemma

    return simplemma.lemmatize(word, lang=language)


def is_dictionary_word(word: str, *, language: str) -> bool:
    """Is `word` (as written or lower case) an inflected form or a lemma of the language's
    dictionary: an ordinary word ("later", "crazy", "fear"), not a name nobody lists?"""
    dictionary = _dictionary(language)
    return any(form in dictionary for form in {word, word.lower(), word.capitalize()})
