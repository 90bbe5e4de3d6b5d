"""Reading prompts that hold datamarked text (apps.memory.provenance)."""

from __future__ import annotations

import re

from apps.memory.provenance import MARKERS

_MARK = re.compile(f"[{re.escape(MARKERS)}]")


def unmarked(prompt: str) -> str:
    """`prompt` with every datamark read as the space it stands for: what it says, marked or
    not."""
    return _MARK.sub(" ", prompt)


def marked(text: str, marker: str) -> str:
    """`text` as its data is datamarked."""
    return marker.join(text.split())
