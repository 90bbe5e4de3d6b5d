"""The one budgeting function: drop what may go, shorten long bodies, refuse what cannot fit."""

from __future__ import annotations

import pytest

from apps.core.llm.fitting import (
    NEVER,
    Piece,
    TooLong,
    fit,
    shorten_middle,
)
from apps.core.llm.limits import TokenCounter

COUNTER = TokenCounter(chars_per_token=4.0)


def test_what_fits_is_sent_whole():
    pieces = [Piece("a" * 40), Piece("b" * 40, keep=1)]

    assert fit(pieces, budget=20, counter=COUNTER) == ["a" * 40, "b" * 40]


def test_over_budget_the_lowest_keep_goes_first_and_the_rest_stays_in_order():
    pieces = [Piece("fixed" * 8), Piece("x" * 40, keep=2), Piece("y" * 40, keep=1)]

    texts = fit(pieces, budget=21, counter=COUNTER)

    assert texts == ["fixed" * 8, "x" * 40, None]


def test_a_long_body_loses_its_middle_behind_a_marker_never_dropped():
    body = "START " + "middle " * 2000 + " END"
    pieces = [Piece("frame"), Piece(body, shorten=True), Piece("memory", keep=1)]

    texts = fit(pieces, budget=400, counter=COUNTER)

    shortened = texts[1]
    assert shortened.startswith("START") and shortened.endswith("END")
    assert "characters left out" in shortened
    assert sum(COUNTER.text(text) for text in texts if text) <= 400
    assert texts[2] is None, "droppable pieces go before any body is shortened"


def test_what_cannot_fit_even_shortened_is_refused_with_the_counts():
    with pytest.raises(TooLong) as refused:
        fit([Piece("q" * 4000, keep=NEVER)], budget=100, counter=COUNTER)

    assert refused.value.needed == 1000 and refused.value.budget == 100


def test_shortening_keeps_the_start_and_the_end():
    text = "".join(str(n % 10) for n in range(1000))

    short = shorten_middle(text, 100)

    assert short.startswith(text[:60]) and short.endswith(text[-30:])
    assert "[… 900 characters left out …]" in short
    assert shorten_middle("short", 100) == "short"
