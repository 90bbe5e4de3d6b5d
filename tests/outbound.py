"""A guard for write paths: no LLM, embedding or HTTP call starts inside a transaction.

Every outbound call of the product goes through the LLM gateway (apps.core.llm), whose only way
out is an httpx (or, inside the openai SDK, httpx2) request: the import contract keeps both
libraries and `openai` out of every other module. The local embedder makes no request but is
as slow as one, and counts the same.

Only atomic blocks the product opened count: pytest-django wraps a non-transactional test in
atomic blocks of its own, which are set aside when the guard starts. The check runs on the
thread that makes the call, with that thread's connection, so a call on a pool thread counts
that thread's blocks.
"""

from __future__ import annotations

import traceback
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import httpx2
from django.db import connections

from apps.memory.embedding import LocalEmbedder

ROOT = str(Path(__file__).resolve().parent.parent)


class OutboundCallInAtomic(AssertionError):
    pass


def _our_frames() -> str:
    """Where the call started, in our own code (the SDK's frames say nothing)."""
    ours = [
        frame
        for frame in traceback.extract_stack()[:-3]
        if frame.filename.startswith(ROOT) and "/.venv/" not in frame.filename
    ]
    return "".join(traceback.format_list(ours[-12:]))


def _wrap(owner: type, name: str, check, *, is_async: bool = False):
    original = getattr(owner, name)
    if is_async:

        async def wrapper(self, *args, **kwargs):
            check(f"{owner.__module__}.{owner.__name__}.{name}")
            return await original(self, *args, **kwargs)
    else:

        def wrapper(self, *args, **kwargs):
            check(f"{owner.__module__}.{owner.__name__}.{name}")
            return original(self, *args, **kwargs)

    setattr(owner, name, wrapper)
    return lambda: setattr(owner, name, original)


@contextmanager
def no_outbound_call_in_atomic():
    """Fail, on leaving, if an outbound call started inside an atomic block opened after entry.

    The call itself goes on (a product that catches every exception would hide a raise): the
    failure lists where each offending call started.
    """
    outer = list(connections["default"].atomic_blocks)
    found: list[str] = []

    def check(what: str) -> None:
        opened = [
            block
            for block in connections["default"].atomic_blocks
            if not any(block is mine for mine in outer)
        ]
        if opened:
            found.append(f"{what} inside {len(opened)} atomic block(s), from:\n{_our_frames()}")

    with ExitStack() as restore:
        for owner, name, is_async in (
            (httpx.HTTPTransport, "handle_request", False),
            (httpx.AsyncHTTPTransport, "handle_async_request", True),
            (httpx2.HTTPTransport, "handle_request", False),
            (httpx2.AsyncHTTPTransport, "handle_async_request", True),
            (LocalEmbedder, "embed", False),
        ):
            restore.callback(_wrap(owner, name, check, is_async=is_async))
        yield found
    if found:
        raise OutboundCallInAtomic(
            f"{len(found)} outbound call(s) started inside a transaction:\n\n" + "\n".join(found)
        )
