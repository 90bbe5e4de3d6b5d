"""Runaway output: an answer stuck in a loop, and template tokens in a title."""

from __future__ import annotations

import time

import pytest

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


def test_a_look_for_a_loop_costs_the_same_however_long_the_answer():
    answers = ["=" * 200_000, "word " * 40_000, "ab " * 60_000, "The quick brown fox. " * 10_000]
    for answer in answers:
        started = time.perf_counter()
        for _ in range(10):
            repeated_tail(answer)
        assert (time.perf_counter() - started) / 10 < 0.01, answer[:20]
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
