"""The status line under a reply: what each part of the turn did (the pipeline's subsystems).

Live while the turn runs (the pipeline reports each step), then read back from the reply's
trace once it is saved; the reflection's part changes once more when the worker is done.
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.chat.models import Message

ORDER = ("session", "router", "retrieval", "tools", "world", "llm", "reflection")
LABELS = {
    "session": "turn",
    "router": "router",
    "retrieval": "retrieval",
    "tools": "tools",
    "world": "topics and style",
    "llm": "LLM",
    "reflection": "reflection",
}


@dataclass(frozen=True)
class Part:
    name: str
    state: str  # "running", "ok", "skipped" or "error"
    text: str

    @property
    def label(self) -> str:
        return LABELS.get(self.name, self.name)


def live_parts(states: dict[str, tuple[str, str]]) -> list[Part]:
    """The line while the turn runs, from the pipeline's reports (subsystem -> state, text)."""
    return [Part(name, *states[name]) for name in ORDER if name in states]


def final_parts(message: Message) -> list[Part]:
    """The line of a saved reply, from its trace; [] for a reply from before the pipeline."""
    trace = message.trace or {}
    spans = {span.get("name"): span for span in trace.get("spans", [])}
    if not spans:
        return []
    parts = []
    if message.status in (Message.Status.COMPLETE, Message.Status.FAILED):
        ended = f"ended · {_ms(message.latency_ms)}" if message.latency_ms is not None else "ended"
        parts.append(Part("session", "ok", ended))
    elif message.status == Message.Status.CANCELLED:
        parts.append(Part("session", "skipped", "stopped"))
    route = trace.get("route") or {}
    if route:
        failed = bool(route.get("error"))
        text = "failed: answered directly" if failed else f"{route['route']} ({route['by']})"
        parts.append(Part("router", "error" if failed else "ok", text))
    recall = spans.get("recall")
    if recall:
        if recall.get("outcome") == "error":
            parts.append(Part("retrieval", "error", "full-text only: the embedding failed"))
        else:
            used = recall_words(*recall_counts(trace.get("memory") or {}))
            parts.append(Part("retrieval", "ok", f"{used} · {_ms(recall['ms'])}"))
    for name, subsystem in (("tools", "tools"), ("world", "world")):
        span = spans.get(name)
        if span and span.get("outcome") != "skipped":
            state = span.get("outcome", "ok")
            text = span.get("error") or span.get("detail", "")
            parts.append(Part(subsystem, state, f"{text} · {_ms(span['ms'])}"))
    if message.status == Message.Status.COMPLETE:
        seconds = f" · {_ms(message.latency_ms)}" if message.latency_ms is not None else ""
        answered_by = (trace.get("answered_by") or {}).get("model") or message.model
        parts.append(Part("llm", "ok", f"{answered_by}{seconds}"))
    elif message.status == Message.Status.FAILED:
        parts.append(Part("llm", "error", message.error or "failed"))
    elif message.status == Message.Status.CANCELLED:
        parts.append(Part("llm", "skipped", "stopped"))
    reflection = trace.get("reflection")
    if learns_nothing(message):
        parts.append(Part("reflection", "skipped", "nothing is learned here"))
    elif isinstance(reflection, dict) and reflection.get("failed"):
        parts.append(Part("reflection", "error", "failed: " + reflection.get("error", "")[:120]))
    elif isinstance(reflection, dict):
        learned = len(reflection.get("created", [])) + len(reflection.get("updated", []))
        parts.append(Part("reflection", "ok", f"learned {learned}"))
    elif message.status == Message.Status.COMPLETE:
        parts.append(Part("reflection", "running", "queued"))
    return parts


def recall_counts(memory: dict) -> tuple[int, int]:
    """(the user's own, shared) of what a turn recalled (its trace's "memory"): the user's
    memories, facts and past conversations; global knowledge, which is no one's memory."""
    recalled = [
        item for kind in ("memories", "episodes", "triples") for item in memory.get(kind) or []
    ]
    shared = sum(1 for item in recalled if item.get("global"))
    return len(recalled) - shared, shared


def recall_words(own: int, shared: int) -> str:
    words = f"{own} memor{'y' if own == 1 else 'ies'}"
    if shared:
        words += f", {shared} shared fact{'' if shared == 1 else 's'}"
    return words


def learns_nothing(message: Message) -> bool:
    """A reply of a temporary chat, or of a turn with memory off: no reflection ever reads it."""
    memory_off = bool(((message.trace or {}).get("memory") or {}).get("off"))
    return memory_off or message.conversation.temporary


def _ms(ms: float | None) -> str:
    if ms is None:
        return ""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"
