"""A reasoning model's thinking, kept apart from its reply.

Reasoning models (qwen3, deepseek-r1, gpt-oss) think before they answer. Servers hand the
thinking over in one of three shapes: llama.cpp's default `--reasoning-format deepseek` moves it
to `reasoning_content`, Ollama's OpenAI-compatible endpoint to `reasoning`, and a server that
leaves it alone sends it inline as `<think>…</think>` before the reply. The gateway reads all
three into `reasoning`, so that reflection, titles, the history sent back and structured parsing
see only the reply.
"""

from __future__ import annotations

from django.core.cache import cache

OPEN, CLOSE = "<think>", "</think>"
REASONING_FIELDS = ("reasoning_content", "reasoning")
# Tokens added to the reply's cap of a model seen thinking, so the thinking does not eat the
# answer; remembered per endpoint for a week.
REASONING_ALLOWANCE = 1024
SEEN_SECONDS = 7 * 24 * 3600


def seen_key(endpoint_key: str) -> str:
    """Set once the model at the endpoint was seen thinking; `model_limits` reads it."""
    return f"llm:reasons:{endpoint_key}"


def reasoning_seen(endpoint_key: str) -> None:
    cache.set(seen_key(endpoint_key), True, SEEN_SECONDS)


class ThinkSplitter:
    """Splits streamed text into (reasoning, reply) when the reply opens with `<think>`.

    Tags may arrive cut across chunks: text that could still be the start of a tag is held back
    until the next chunk (or `flush`) tells.
    """

    def __init__(self) -> None:
        self._held = ""
        self._state = "start"  # start → thinking → closed → replying, or start → replying

    def feed(self, text: str) -> tuple[str, str]:
        self._held += text
        reasoning = reply = ""
        while self._held:
            if self._state == "start":
                stripped = self._held.lstrip()
                if stripped.startswith(OPEN):
                    self._held = stripped[len(OPEN) :]
                    self._state = "thinking"
                elif OPEN.startswith(stripped):
                    return reasoning, reply  # maybe a tag still arriving
                else:
                    self._state = "replying"
            elif self._state == "thinking":
                end = self._held.find(CLOSE)
                if end == -1:
                    keep = _partial_tail(self._held, CLOSE)
                    reasoning += self._held[: len(self._held) - keep]
                    self._held = self._held[len(self._held) - keep :]
                    return reasoning, reply
                reasoning += self._held[:end]
                self._held = self._held[end + len(CLOSE) :]
                self._state = "closed"
            elif self._state == "closed":
                # The blank line after the thinking may come as tokens of its own.
                self._held = self._held.lstrip()
                if self._held:
                    self._state = "replying"
            else:
                reply += self._held
                self._held = ""
        return reasoning, reply

    def flush(self) -> tuple[str, str]:
        held, self._held = self._held, ""
        if self._state == "thinking":
            return held, ""
        return "", held


def _partial_tail(text: str, tag: str) -> int:
    """How many characters at the end of `text` could begin `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


def split_reasoning(text: str) -> tuple[str, str]:
    """A whole reply's (reasoning, reply)."""
    splitter = ThinkSplitter()
    reasoning, reply = splitter.feed(text)
    more_reasoning, more_reply = splitter.flush()
    return reasoning + more_reasoning, reply + more_reply
