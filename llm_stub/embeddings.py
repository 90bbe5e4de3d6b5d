"""The stub's embeddings: deterministic unit vectors from the words of a text."""

from __future__ import annotations

import hashlib
import math
import os
import re

DEFAULT_EMBED_MODEL = "nomic-embed-text"
DEFAULT_DIM = 768

_WORD_RE = re.compile(r"\w+")


def default_dim() -> int:
    raw = os.environ.get("THALAMUS_EMBED_DIM", "").strip()
    return int(raw) if raw else DEFAULT_DIM


def embed_text(text: str, dim: int) -> list[float]:
    """Deterministic unit vector for ``text`` via signed feature hashing of its words.

    hashlib (not ``hash()``) keeps vectors identical across processes and PYTHONHASHSEED.
    """
    if dim < 1:
        raise ValueError("dim must be >= 1")
    vec = [0.0] * dim
    for word in _WORD_RE.findall(text.lower()):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        bucket = int.from_bytes(digest[:6], "big") % dim
        vec[bucket] += 1.0 if digest[7] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        # Empty (or fully cancelled) text still needs a valid, fixed, non-zero vector.
        return [1.0 / math.sqrt(dim)] * dim
    return [v / norm for v in vec]
