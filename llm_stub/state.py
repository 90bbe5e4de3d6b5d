"""What the stub's request handlers share: the scripted replies, the settings, the request log
and the generation slots. ``StubServer`` (server.py) serves it over HTTP."""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from llm_stub.embeddings import default_dim
from llm_stub.scripts import (
    DEFAULT_KEYS,
    DEFAULT_SETTINGS,
    Plan,
    check_settings,
    normalize_reply,
)

DEFAULT_MODELS: tuple[str, ...] = ("qwen2.5:7b", "nomic-embed-text", "demo")
DEFAULT_CHAT_MODEL = "qwen2.5:7b"


class StubState:
    """The scripting API of ``StubServer``: replies, settings, the request log, the slots."""

    def __init__(
        self,
        *,
        dim: int | None = None,
        demo: bool = False,
        models: list[str] | tuple[str, ...] | None = None,
    ) -> None:
        self.dim = default_dim() if dim is None else dim
        if self.dim < 1:
            raise ValueError("dim must be >= 1")
        self.demo = demo
        self.models = list(DEFAULT_MODELS if models is None else models)
        self._cond = threading.Condition()
        self._queue: list[dict[str, Any]] = []
        self._requests: list[dict[str, Any]] = []
        self._first_token_seconds: list[float] = []
        self._defaults: dict[str, Any] = copy.deepcopy(DEFAULT_SETTINGS)
        self._slot_queue: deque[object] = deque()
        self._generating = 0
        self._max_concurrent = 0
        self._stopping = threading.Event()

    # scripting -------------------------------------------------------------------

    def script(self, *replies: dict[str, Any] | str) -> None:
        """Append scripted replies to the FIFO queue (all validated before any is queued)."""
        normalized = [normalize_reply(r) for r in replies]
        with self._cond:
            self._queue.extend(normalized)

    def set_defaults(self, **kw: Any) -> None:
        """Persistent settings: ``ttft``/``tps``/``fault`` for chat requests no scripted reply
        matches, and the server's behaviour (see the module docstring and DEFAULT_SETTINGS)."""
        unknown = set(kw) - DEFAULT_KEYS
        if unknown:
            raise ValueError(f"unknown default keys: {sorted(unknown)}")
        check_settings(kw)
        with self._cond:
            self._defaults.update(copy.deepcopy(kw))
            self._cond.notify_all()  # a change of slots lets waiting requests in

    @property
    def defaults(self) -> dict[str, Any]:
        with self._cond:
            return copy.deepcopy(self._defaults)

    def reset(self) -> None:
        """Clear the queue, the request log and ``max_concurrent``; restore the settings."""
        with self._cond:
            self._queue.clear()
            self._requests.clear()
            self._defaults = copy.deepcopy(DEFAULT_SETTINGS)
            self._max_concurrent = self._generating
            self._cond.notify_all()

    @property
    def pending(self) -> list[dict[str, Any]]:
        with self._cond:
            return copy.deepcopy(self._queue)

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._cond:
            return copy.deepcopy(self._requests)

    @property
    def generating(self) -> int:
        """The chat generations running now (a reply's last byte can reach its client before its
        handler has given its slot back)."""
        with self._cond:
            return self._generating

    @property
    def max_concurrent(self) -> int:
        """The most chat generations that ran at once (since start or ``reset()``)."""
        with self._cond:
            return self._max_concurrent

    @property
    def first_token_seconds(self) -> list[float]:
        """Per streamed chat reply: from its request arriving to its first text sent.

        The stub's own time to first token (the scripted ttft, or its handling when that takes
        longer, plus the scheduling of its thread), which a benchmark subtracts to find what the
        caller itself added.
        """
        with self._cond:
            return list(self._first_token_seconds)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(
                    f"expected {n} requests within {timeout}s, got {len(self._requests)}"
                )
            return copy.deepcopy(self._requests)

    # used by the handler -----------------------------------------------------------

    def _record(self, path: str, body: Any) -> dict[str, Any]:
        entry = {"path": path, "body": copy.deepcopy(body)}
        with self._cond:
            self._requests.append(entry)
            self._cond.notify_all()
        return entry

    def _annotate(self, entry: dict[str, Any], **fields: Any) -> None:
        with self._cond:
            entry.update(fields)

    def _take_slot(self, client_gone: Callable[[], bool]) -> bool:
        """Wait, in arrival order, for a free generation slot; False if the server stops or
        the client goes away first."""
        ticket = object()
        with self._cond:
            self._slot_queue.append(ticket)
            try:
                while self._slot_queue[0] is not ticket or not self._slot_free():
                    if self._stopping.is_set() or client_gone():
                        return False
                    self._cond.wait(0.05)  # also polls for the client going away
            finally:
                self._slot_queue.remove(ticket)
                self._cond.notify_all()
            self._generating += 1
            self._max_concurrent = max(self._max_concurrent, self._generating)
            return True

    def _slot_free(self) -> bool:
        slots = self._defaults["slots"]
        return slots is None or self._generating < slots

    def _release_slot(self) -> None:
        with self._cond:
            self._generating -= 1
            self._cond.notify_all()

    def _take_plan(self, endpoint: str, text: str, schema: str | None = None) -> Plan:
        with self._cond:
            for index, reply in enumerate(self._queue):
                if reply.get("endpoint", "chat") != endpoint:
                    continue
                if reply.get("schema") is not None and reply["schema"] != schema:
                    continue
                match = reply.get("match")
                if match is not None and match not in text:
                    continue
                del self._queue[index]
                return Plan.from_reply(reply)
            if endpoint != "chat":
                return Plan(None, 0.0, 0.0, None, "stop")
            defaults = dict(self._defaults)
        return Plan(
            content=None,
            ttft=float(defaults["ttft"]),
            tps=float(defaults["tps"]),
            fault=defaults["fault"],
            finish_reason="stop",
        )

    def _give_back(self, plan: Plan) -> None:
        """A scripted reply marked `resend` whose client left before its end was not
        delivered: the next matching request gets it, as a real model would write the same
        reply again (a client that gives way and asks later). Others are used up, as a
        stopped answer is."""
        if plan.scripted is not None and plan.scripted.get("resend"):
            with self._cond:
                self._queue.insert(0, plan.scripted)

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops first; returns False when it did."""
        if seconds <= 0:
            return not self._stopping.is_set()
        return not self._stopping.wait(seconds)
