"""The turn's typed state, which each step of the pipeline fills in its part of, and the spans
that record how each step ran."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from apps.chat.models import Message
from apps.cognition.route import RouteDecision
from apps.cognition.turn_memory import MemoryForTurn
from apps.cognition.turn_request import PreparedTurn
from apps.core.models import RuntimeConfig


@dataclass
class Span:
    name: str
    start_ms: float
    ms: float = 0.0
    outcome: str = "ok"  # "ok", "skipped" or "error"
    error: str = ""
    detail: str = ""

    def as_trace(self) -> dict:
        trace = {
            "name": self.name,
            "start_ms": round(self.start_ms, 2),
            "ms": round(self.ms, 2),
            "outcome": self.outcome,
        }
        if self.error:
            trace["error"] = self.error[:300]
        if self.detail:
            trace["detail"] = self.detail[:200]
        return trace


@dataclass
class Spans:
    """The turn's steps as they ran; times are from the turn's start."""

    started: float = field(default_factory=time.perf_counter)
    items: list[Span] = field(default_factory=list)

    @contextmanager
    def span(self, name: str):
        span = Span(name, (time.perf_counter() - self.started) * 1000)
        self.items.append(span)
        try:
            yield span
        except BaseException as exc:
            span.outcome = "error"
            span.error = span.error or f"{type(exc).__name__}: {exc}"
            raise
        finally:
            span.ms = (time.perf_counter() - self.started) * 1000 - span.start_ms

    def open(self, name: str) -> Span:
        """A span that ends when `close` is called (a step running while others do)."""
        span = Span(name, (time.perf_counter() - self.started) * 1000)
        self.items.append(span)
        return span

    def close(self, span: Span, *, error: str = "") -> None:
        span.ms = (time.perf_counter() - self.started) * 1000 - span.start_ms
        if error:
            span.outcome, span.error = "error", error

    def record(
        self, name: str, *, since: float, outcome: str = "ok", error: str = "", detail: str = ""
    ) -> None:
        """A step that ran elsewhere (the answer), from the perf_counter time `since` to now."""
        start = (since - self.started) * 1000
        ms = (time.perf_counter() - since) * 1000
        self.items.append(Span(name, start, ms, outcome, error, detail))

    def skip(self, name: str, reason: str) -> None:
        self.items.append(
            Span(
                name, (time.perf_counter() - self.started) * 1000, outcome="skipped", detail=reason
            )
        )

    def as_trace(self) -> list[dict]:
        return [span.as_trace() for span in self.items]


@dataclass
class CallOptions:
    """What an API client sets for its call; None keeps Thalamus's own setting."""

    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    # Capped by the model's reply cap.
    max_tokens: int | None = None
    stop: list[str] | None = None
    seed: int | None = None
    # The client's system prompt, ahead of the memory block.
    system: str = ""
    # False: no recall, tools or world change for this turn, and no reflection on its reply.
    remember: bool = True


@dataclass
class TurnInput:
    """What the turn starts from: who asks, where, what."""

    user: object
    conversation: object
    text: str
    # None until the recall has read it (on its own thread: the event loop must not).
    config: RuntimeConfig | None
    time_zone: str
    options: CallOptions = field(default_factory=CallOptions)
    # The user's settings when the caller read them with the request (the API, with its key);
    # None: the recall reads them.
    prefs: object | None = None
    # The conversation was read from the database by this request (the API's accept): its
    # model pick is current, and a turn that starts one is saved without a pick.
    conversation_read: bool = False


@dataclass
class Turn:
    """The typed turn state; each step fills in its own part."""

    input: TurnInput
    spans: Spans = field(default_factory=Spans)
    route: RouteDecision | None = None
    memory: MemoryForTurn | None = None
    reply: Message | None = None
    history: list[Message] = field(default_factory=list)
    tools: object | None = None  # toolloop.ToolLoopResult
    # The world modifier runs after the answer (`world.world_change_after_reply`).
    world_after_answer: bool = False
    # The model picked for the conversation (its chat model picker), when still offered.
    picked_model: str | None = None
    prepared: PreparedTurn | None = None
