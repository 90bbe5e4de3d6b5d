"""Mutated copies of a valid export, for the importers' fuzz tests: the same seed makes the
same files. Each file has one to three mutations: a field missing, a value of the wrong type, a
null, a huge string (with NUL characters and lone surrogates), deep nesting, a number JSON
cannot hold, NaN; or, at the byte level, bytes that are not UTF-8 or a file cut short.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

WRONG_TYPES = [0, -1, 1.5, 10**18, True, False, "", "text", [], {}, ["text"], {"key": "value"}]
# Characters a huge string is made of: letters, emoji, right-to-left text, NUL and a lone
# surrogate (which JSON's \ud800 escape makes and UTF-8 cannot encode).
ALPHABET = "aZ \n\té€😀\u202e\u05d0\x00\ud800"
# Written into the JSON text after json.dumps, which can write neither.
HUGE_NUMBER = "__huge_number__"
DEEP = "__deep__"
BAD_BYTES = [b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80\x80", b"\xc0\xaf"]


@dataclass
class Mutant:
    data: bytes
    mutations: list[str]
    # Positions in the top-level list that a mutation touched; None: the whole file was.
    touched: set[int] | None


def mutants(sample, *, count: int, seed: int) -> Iterator[Mutant]:
    rng = random.Random(seed)
    for _ in range(count):
        payload = copy.deepcopy(sample)
        mutations, touched = [], set()
        for _ in range(rng.randint(1, 3)):
            payload, name, position = _mutate_tree(payload, rng)
            mutations.append(name)
            touched = None if position is None or touched is None else touched | {position}
        # Escaped (\ud800) a lone surrogate is valid JSON; written raw it is not UTF-8, so the
        # raw half of the files has it replaced (bytes that are not UTF-8 are a mutation below).
        escaped = rng.random() < 0.5
        text = json.dumps(payload, ensure_ascii=escaped)
        text = text.replace(f'"{HUGE_NUMBER}"', "9" * rng.choice([400, 5000]))
        text = re.sub(f'"{DEEP}(\\d+)"', lambda match: _nested(int(match[1])), text)
        data = text.encode("utf-8", "replace")
        if rng.random() < 0.2:
            data, name = _mutate_bytes(data, rng)
            mutations.append(name)
            touched = None
        yield Mutant(data=data, mutations=mutations, touched=touched)


def _places(payload) -> list[tuple[object, object, int | None]]:
    """Every (container, key) in the payload, with the top-level position it lies under."""
    places = []

    def walk(node, position):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in list(items):
            here = key if position is None and isinstance(payload, list) else position
            places.append((node, key, here))
            if isinstance(value, dict | list):
                walk(value, here)

    if isinstance(payload, dict | list):
        walk(payload, None)
    return places


def _mutate_tree(payload, rng: random.Random):
    places = _places(payload)
    kind = rng.choice(["missing", "wrong type", "null", "huge string", "deep nesting", "number"])
    if not places:
        return rng.choice(WRONG_TYPES), "wrong type (the whole file)", None
    container, key, position = rng.choice(places)
    if kind == "missing":
        del container[key]
        # A conversation taken out of the top-level list moves every later one up a place.
        return payload, "missing", None if container is payload else position
    container[key] = _value(kind, rng)
    return payload, kind, position


def _value(kind: str, rng: random.Random):
    if kind == "wrong type":
        return copy.deepcopy(rng.choice(WRONG_TYPES))
    if kind == "null":
        return None
    if kind == "huge string":
        size = rng.choice([300, 5_000, 100_000, 1_000_000])
        # A random kilobyte repeated: drawing a million characters one by one takes a second.
        chunk = "".join(rng.choices(ALPHABET, k=1_000))
        return (chunk * (size // 1_000 + 1))[:size]
    if kind == "deep nesting":
        return f"{DEEP}{rng.choice([50, 500, 5_000])}"
    return rng.choice([HUGE_NUMBER, float("nan"), float("inf"), -(2**63), 2**64])


def _nested(depth: int) -> str:
    """Lists and objects nested `depth` deep, as JSON text."""
    opening = "".join("[" if level % 2 else '{"nested": ' for level in range(depth))
    closing = "".join("]" if level % 2 else "}" for level in reversed(range(depth)))
    return f'{opening}"bottom"{closing}'


def _mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    if rng.random() < 0.5:
        return data[: rng.randrange(1, len(data))], "cut short"
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(data))
        data = data[:at] + rng.choice(BAD_BYTES) + data[at:]
    return data, "not UTF-8"
