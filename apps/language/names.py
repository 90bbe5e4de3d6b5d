"""Whether words are a person's given name: gender-guesser's list of about 45,000 first names
of Europe and beyond (Jörg Michael's nam_dict.txt), loaded once, at first use (0.1 s)."""

from __future__ import annotations

import threading
from functools import cache
from pathlib import Path

_lock = threading.Lock()
# The columns of nam_dict.txt before the name: its gender code.
_GENDER_CODES = frozenset({"M", "F", "?", "?M", "?F", "1M", "1F", "M?", "F?"})


@cache
def _first_names() -> frozenset[str]:
    import gender_guesser

    path = Path(gender_guesser.__file__).parent / "data" / "nam_dict.txt"
    names = set()
    with _lock, path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            parts = line[:30].split()
            if len(parts) >= 2 and parts[0] in _GENDER_CODES:
                names.add(parts[1].replace("+", "-").casefold())
    return frozenset(names)


def is_first_name(word: str) -> bool:
    return word.casefold() in _first_names()
