"""Runaway output: an answer stuck in a loop, and template tokens in a title."""

from __future__ import annotations

import time

import pytest

from apps.cognition.answer import LOOP_CHECK_CHARS
from apps.cognition.runaway import LOOP_TAIL_CHARS, clean_title, repeated_tail


def test_a_looping_line_is_cut_after_its_first_copy():
    line = "I am sorry, I cannot help with that.\n"
    text = "Here is what I found.\n" + line * 8 + "I am sor"  # the stream stops anywhere
    assert text[: repeated_tail(text)] == "Here is what I found.\n" + line


def test_a_looping_block_of_several_lines_is_cut_after_its_first_copy():
    block = "Step one: mix the flour.\nStep two: bake the bread.\nStep three: eat.\n"
    text = "A recipe:\n\n" + block * 4 + "Step one: mi"
    assert text[: repeated_tail(text)] == "A recipe:\n\n" + block


def test_a_sentence_looping_on_one_line_is_cut_after_its_first_copy():
    text = "Well. " + "The answer is the answer we found. " * 6
    assert text[: repeated_tail(text)] == "Well. The answer is the answer we found. "


def test_text_that_ends_without_repeating_itself_is_not_flagged():
    text = "The quick brown fox. " * 6 + "Then the fox went home and slept until noon."
    assert repeated_tail(text) is None
    assert repeated_tail("") is None


@pytest.mark.parametrize(
    "text",
    [
        # A table whose rows repeat, a long rule, a list and code with repeated short lines.
        "| Day | Rain |\n|-----|------|\n" + "| 0 | 0 |\n" * 30,
        "Results\n" + "=" * 2000,
        "Results\n" + "-" * 400 + "\n" + "=" * 400,
        "Shopping:\n" + "- milk\n" * 40,
        "```python\n" + "x = 1\n" * 40 + "```",
        "```c\n" + "    }\n" * 60 + "}\n```",
        "```python\nclass A:\n" + "    pass\n" * 30 + "```",
        "ha " * 100,
        "A line said twice.\nA line said twice.\n",  # too little to be a loop
    ],
)
def test_legitimate_repetition_is_not_flagged(text):
    assert repeated_tail(text) is None


def _cost(text: str) -> float:
    """The least time of a few looks (the least is the one the machine's load touched least)."""
    times = []
    for _ in range(5):
        started = time.perf_counter()
        repeated_tail(text)
        times.append(time.perf_counter() - started)
    return min(times)


def test_a_look_for_a_loop_costs_the_same_however_long_the_answer():
    # Compared with the same kind of text just as long as the tail looked at, not with a clock:
    # a loaded machine slows both alike.
    for unit, copies in (
        ("=", 200_000),
        ("word ", 40_000),
        ("ab ", 60_000),
        ("The quick brown fox. ", 10_000),
    ):
        short = unit * (LOOP_TAIL_CHARS // len(unit))
        assert _cost(unit * copies) < 3 * _cost(short) + 0.002, unit
    # Only the tail is looked at: a loop longer than that is found within it.
    assert repeated_tail("Intro. " + "The quick brown fox. " * 10_000) > LOOP_TAIL_CHARS


@pytest.mark.parametrize(
    ("raw", "title"),
    [
        ("Trip to Rome", "Trip to Rome"),
        ("Trip to Rome<|im_end|>\n<|im_start|>user\nThanks!", "Trip to Rome"),
        ("<|im_start|>assistant\nTrip to Rome<|im_end|>", "Trip to Rome"),
        (
            "<|start_header_id|>assistant<|end_header_id|>\n\nBees on the balcony<|eot_id|>",
            "Bees on the balcony",
        ),
        ("<start_of_turn>model\nSourdough basics<end_of_turn>", "Sourdough basics"),
        ("<s>[INST] Sourdough basics [/INST]</s>", "Sourdough basics"),
        ("<think>\nThe user asks about bees.\n</think>\n\nBees in winter", "Bees in winter"),
        ('**Title:** "Bees on the balcony"', "Bees on the balcony"),
        ("# Sourdough basics\n\nA conversation about bread.", "Sourdough basics"),
        ("`Django` *signals* explained", "Django signals explained"),
        ("assistant: Trip to Rome", "Trip to Rome"),
        ("Trip to Rome. user", "Trip to Rome."),
        # Role words that belong to the title stay.
        ("Training a model", "Training a model"),
        ("User accounts in Django", "User accounts in Django"),
        ("A" + " very" * 30 + " long title", "A" + " very" * 15 + "…"),
    ],
)
def test_a_title_is_cleaned_of_template_tokens_roles_and_markup(raw, title):
    assert clean_title(raw) == title


@pytest.mark.parametrize(
    "raw",
    ["<|im_end|>user", "<|im_end|>user\nAnd Paris?", "", "  ", "---", "**", "assistant", "x"],
)
def test_a_title_with_nothing_worth_keeping_is_empty(raw):
    assert clean_title(raw) == ""


# What SmolLM2-135M wrote on a second turn (#38): each copy a little different from the last.
NEAR_LOOP = (
    "Hello! I'm glad to have you here, and I'm happy to have you here, too. "
    "I'm so glad to have you here, and I'm happy to be here with you. "
    "I'm glad you're here, and I'm happy to have you here, too. "
    "I'm really glad to have you here, and I'm so happy to have you here, too. "
    "I'm glad to have you here and I'm happy that you are here, too. "
    "I'm glad to have you here, and I'm happy to have you here with me. "
)


def test_an_answer_repeating_itself_with_small_changes_is_cut_at_the_end_of_a_sentence():
    text = NEAR_LOOP + "I'm so gla"

    cut = repeated_tail(text)

    # The words looked at begin a sentence or so in: the cut comes at most one copy later.
    assert text[:cut] in (
        "Hello! I'm glad to have you here, and I'm happy to have you here, too.",
        "Hello! I'm glad to have you here, and I'm happy to have you here, too. "
        "I'm so glad to have you here, and I'm happy to be here with you.",
    )


def _streamed(text: str) -> tuple[str, int]:
    """What the answer keeps of `text` streamed, looked at as `answer_reply` looks (every
    LOOP_CHECK_CHARS), and how much had arrived when it stopped."""
    for arrived in range(LOOP_CHECK_CHARS, len(text) + LOOP_CHECK_CHARS, LOOP_CHECK_CHARS):
        cut = repeated_tail(text[:arrived])
        if cut is not None:
            return text[:cut], arrived
    return text, len(text)


def test_a_near_loop_is_stopped_within_a_copy_or_two_after_a_proper_start():
    intro = (
        "Welcome back! Yesterday we talked about your garden, the tomatoes that would not "
        "ripen and the shed you want to build before the winter comes. "
    )
    text = intro + NEAR_LOOP * 4

    kept, arrived = _streamed(text)

    assert kept.startswith(intro) and len(kept) < len(intro) + len(NEAR_LOOP)
    assert arrived < len(intro) + 2 * len(NEAR_LOOP)


@pytest.mark.parametrize(
    "text",
    [
        # A list whose lines share a pattern.
        "The planets:\n"
        "- Mercury is the closest planet to the Sun and the smallest planet in the system.\n"
        "- Venus is the second planet from the Sun and the hottest planet in the system.\n"
        "- Earth is the third planet from the Sun and the only planet known to have life.\n"
        "- Mars is the fourth planet from the Sun and is known as the Red Planet.\n"
        "- Jupiter is the fifth planet from the Sun and the largest planet in the system.\n"
        "- Saturn is the sixth planet from the Sun and is famous for its rings.\n"
        "- Uranus is the seventh planet from the Sun and rotates on its side.\n"
        "- Neptune is the eighth planet from the Sun and the windiest planet of all.\n",
        # A week's plan, one line a day.
        "".join(
            f"- {day}: go for a run in the morning, then work on the {task} after lunch.\n"
            for day, task in [
                ("Monday", "report"),
                ("Tuesday", "garden shed"),
                ("Wednesday", "tax forms"),
                ("Thursday", "slides for the talk"),
                ("Friday", "budget"),
                ("Saturday", "bike repair"),
                ("Sunday", "letters to friends"),
            ]
        ),
        # A table with words in its cells.
        "| Name | Role | Team |\n|---|---|---|\n"
        + "".join(
            f"| {name} | senior software engineer | the platform team in Berlin |\n"
            for name in ["Ann", "Bob", "Cleo", "Dan", "Eve", "Finn", "Gus", "Hana", "Ivo"]
        ),
        # Tests in a code block repeat their shape line after line.
        "```python\n"
        + "".join(
            f"def test_{n}(self):\n    response = self.client.get('/{n}/')\n"
            f"    self.assertEqual(response.status_code, 200)\n\n"
            for n in ["home", "about", "contact", "blog", "shop", "cart", "login", "admin"]
        )
        + "```\nThese tests check that every page answers.",
        # The same, still being written.
        "```python\n"
        + "".join(
            f"def test_{n}(self):\n    response = self.client.get('/{n}/')\n"
            f"    self.assertEqual(response.status_code, 200)\n\n"
            for n in ["home", "about", "contact", "blog", "shop", "cart", "login", "admin"]
        ),
        # Steps of a recipe with words that come back.
        "To make bread: Mix the flour with the water and the salt in a large bowl. Knead "
        "the dough for ten minutes until it is smooth. Let the dough rest for an hour in a "
        "warm place. Shape the dough into a loaf and put it in a tin. Let the loaf rest for "
        "another half hour. Bake the loaf for forty minutes in a hot oven. Let the bread "
        "cool on a rack before you cut it, so that the crumb sets.",
    ],
)
def test_lists_tables_code_and_explanations_are_not_near_loops(text):
    assert repeated_tail(text) is None
    assert _streamed(text)[0] == text
