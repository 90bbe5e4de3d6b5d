"""Sentences, words and the language of a message: the one text module."""

from __future__ import annotations

import pytest

from apps.language.detect import message_language
from apps.language.text import letter_words, plain, sentences, words


def test_sentences_part_at_their_ends_and_at_line_breaks_but_not_after_an_abbreviation():
    assert sentences("I live in Turin. I love it!  Really?\nYes…  ok") == [
        "I live in Turin.",
        "I love it!",
        "Really?",
        "Yes…",
        "ok",
    ]
    assert sentences("I'm a big fan of FC St. Pauli. Dr. Rossi agrees.") == [
        "I'm a big fan of FC St. Pauli.",
        "Dr. Rossi agrees.",
    ]


def test_words_are_casefolded_and_letter_words_keep_their_spelling_and_apostrophes():
    assert words("Größe, l'utente: I'm 34_x") == ["grösse", "l", "utente", "i", "m", "34_x"]
    assert letter_words("L'utente isn't here_now, 42") == ["L'utente", "isn't", "here", "now", "42"]
    assert plain("I’m here") == "I'm here"


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("name's Ingrid, grew up in Bergen", "en"),
        ("i live in leeds lol", "en"),
        ("vivo a Torino", "it"),
        ("mi chiamo Giulia", "it"),
        ("ho 34 anni", "it"),
        ("j'habite à Lyon", "fr"),
        ("je suis infirmière", "fr"),
        ("ich wohne in Berlin", "de"),
        ("Grüß Gott, Florian, 29", "de"),
        ("soy de Sevilla", "es"),
        ("tengo 34 años", "es"),
        ("¿Qué tal?", "es"),
    ],
)
def test_a_short_chat_message_is_told_by_its_words_or_its_letters(text, language):
    assert message_language(text) == language


def test_a_message_without_telling_words_has_no_language_unless_the_user_has_one():
    assert message_language("Yesterday?") is None
    assert message_language("ok") is None
    # "me" is English and Spanish alike: the user's own language settles it.
    assert message_language("me") is None
    assert message_language("me", preferred="es") == "es"
