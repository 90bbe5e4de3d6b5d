"""Tokens as the stub counts them (whitespace words), the prompt's text, and what a real model
sends beyond its reply: filler when it never stops, a loop, leaked template tokens."""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

TRUNCATE_KEEP = 4  # like Ollama's num_keep: the start of the prompt (system prompt) survives
RUNAWAY_TOKENS = 4096  # how far a model that never stops runs without max_tokens or context
LOOP_LINE = "I will keep saying the same thing over and over.\n"
LEAK_BEFORE = "<|im_start|>assistant\n"
LEAK_AFTER = "<|im_end|>\nuser\n"

_TOKEN_RE = re.compile(r"\S+\s*|\s+")


def count_tokens(text: str) -> int:
    """Token count used for ``usage``: whitespace-separated words, at least 1."""
    return max(1, len(text.split()))


def split_tokens(text: str) -> list[str]:
    """Split text into streaming pieces, keeping whitespace so they concatenate back."""
    return _TOKEN_RE.findall(text)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return ""


def messages_text(messages: list[Any]) -> str:
    return "\n".join(_content_text(m.get("content")) for m in messages if isinstance(m, dict))


def last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


_FILLER_VOCABULARY = """
    the a an this that every some many few other each our their its his her my your
    system model answer question idea reason result method process change value state
    point matter detail example problem solution pattern context memory signal record
    garden river window morning evening winter summer city village market teacher
    student friend neighbour journey letter story picture song voice light shadow
    stone paper table kitchen bridge harbour mountain forest island engine machine
    number measure season history future moment distance direction surface balance
    is was becomes seems remains makes takes gives finds keeps brings shows holds
    turns follows carries reaches leaves builds covers opens moves grows returns
    explains describes suggests considers involves requires supports connects
    quickly slowly carefully quietly often rarely nearly perhaps certainly usually
    simply gently clearly mostly partly early later again still already
    small large quiet bright early late simple careful certain common different
    important possible useful narrow wide warm cold green golden heavy light
    ancient modern gentle steady hidden open broken careful distant familiar
    with from into over under between through across around beyond within without
    and but or because while although since unless until whereas
"""
FILLER_WORDS: tuple[str, ...] = tuple(dict.fromkeys(_FILLER_VOCABULARY.split()))


def filler_text(seed: str, n: int) -> str:
    """`n` words of English-like filler that never settles into a loop.

    Words are drawn pseudo-randomly (seeded by `seed`, so the same request gets the same
    filler) into sentences of 5 to 14 words, so a repetition detector has nothing to find.
    """
    digest = hashlib.blake2b(seed.encode("utf-8"), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    words: list[str] = []
    previous = ""
    left_in_sentence = 0
    while len(words) < n:
        word = rng.choice(FILLER_WORDS)
        if word == previous:
            continue
        previous = word
        if left_in_sentence == 0:
            left_in_sentence = rng.randint(5, 14)
            word = word.capitalize()
        left_in_sentence -= 1
        if left_in_sentence == 0:
            word += rng.choice(".....?!")
        elif rng.random() < 0.06:
            word += ","
        words.append(word)
    return " ".join(words)


def first_words(text: str, n: int) -> str:
    """`text` up to and including its `n`-th whitespace-separated word."""
    if n <= 0:
        return ""
    for index, match in enumerate(re.finditer(r"\S+", text)):
        if index == n - 1:
            return text[: match.end()]
    return text


def shape_reply(
    content: str,
    *,
    eos: bool,
    loop: bool,
    special_tokens: bool,
    limit: int | None,
    seed: str,
) -> tuple[str, bool]:
    """The text a server sends for `content`, and whether it ran into `limit` (tokens).

    A model that never stops (no `eos`, or a `loop`) always runs into the limit, so the
    caller must give one.
    """
    text = content
    if special_tokens:
        text = LEAK_BEFORE + text + LEAK_AFTER
    if loop or not eos:
        if limit is None:
            raise ValueError("a model that never stops needs a limit")
        missing = limit - len(text.split())
        ends_a_word = bool(text) and not text[-1].isspace()
        if missing > 0 and loop:
            more = LOOP_LINE * (missing // len(LOOP_LINE.split()) + 1)
            text += ("\n" if ends_a_word else "") + more
        elif missing > 0:
            text += (" " if ends_a_word else "") + filler_text(seed, missing)
    if limit is not None and len(text.split()) > limit:
        return first_words(text, limit), True
    return text, loop or not eos


def cut_reasoning(reasoning: str, limit: int | None) -> tuple[str, int | None]:
    """`reasoning` within `limit` tokens, and the tokens left after it for the reply."""
    if limit is None:
        return reasoning, None
    return first_words(reasoning, limit), max(0, limit - len(reasoning.split()))


def truncated_prompt(text: str, context: int) -> str:
    """What Ollama keeps of an overlong prompt: its first ``TRUNCATE_KEEP`` words and the
    newest ones after them, ``context - 1`` words in all (one place is left for the reply)."""
    words = text.split()
    room = context - 1
    keep = min(TRUNCATE_KEEP, room)
    return " ".join(words[:keep] + words[len(words) - (room - keep) :])


def last_words(text: str, n: int) -> str:
    words = text.split()
    return text if len(words) <= n else " ".join(words[len(words) - n :])
