"""What the gateway reads and writes: a request's body, a reply and its streamed parts (with a
reasoning model's thinking kept apart), and each call's count in the metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.core.cache import cache

from apps.core.llm.limits import (
    ROLES,
    ModelLimits,
    role_endpoints,
)
from apps.core.llm.outcomes import InvalidReply, LLMError
from apps.core.llm.reasoning import (
    REASONING_FIELDS,
    ThinkSplitter,
)
from apps.core.llm.servers import Endpoint, model_listed, models_key
from apps.core.metrics import record_llm_call
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

OTHER_MODEL = "other"


@dataclass
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    # Of the prompt, what the server took from its cache and what it evaluated anew (llama.cpp
    # reports both: `timings.cache_n` / `prompt_n`, and `prompt_tokens_details.cached_tokens`
    # as OpenAI does); None when the server does not say.
    cached_tokens: int | None = None
    evaluated_tokens: int | None = None

    def cache_trace(self) -> dict | None:
        """The prompt cache's part of this request, for a reply's trace; None if unknown."""
        if self.evaluated_tokens is None and self.cached_tokens is None:
            return None
        return {"evaluated": self.evaluated_tokens, "cached": self.cached_tokens}


def _usage_of(chunk: dict) -> Usage | None:
    """The usage a chunk reports (the last one of a stream, or a whole reply), with what the
    server's prompt cache saved."""
    usage = chunk.get("usage")
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = int_or_none(details.get("cached_tokens")) if isinstance(details, dict) else None
    timings = chunk.get("timings")
    evaluated = int_or_none(timings.get("prompt_n")) if isinstance(timings, dict) else None
    prompt_tokens = int_or_none(usage.get("prompt_tokens"))
    if evaluated is None and cached is not None and prompt_tokens is not None:
        evaluated = max(prompt_tokens - cached, 0)
    return Usage(prompt_tokens, int_or_none(usage.get("completion_tokens")), cached, evaluated)


@dataclass
class Part:
    """One streamed piece of a reply: text, thinking, the finish reason, the usage."""

    text: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None


@dataclass
class Reply:
    """A whole reply, and where it came from."""

    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_calls: list[dict] = field(default_factory=list)
    waited_seconds: float = 0.0
    # The endpoint that answered, and those of the role's chain that failed before it.
    model: str = ""
    base_url: str = ""
    fallback_from: list[dict] = field(default_factory=list)
    # The messages as sent, fitted to that endpoint's window.
    messages: list[dict] = field(default_factory=list)


# ----------------------------------------------------------------------------- chunks


def read_chunk(chunk: object) -> Part:
    """A streamed chunk's text, thinking, finish reason and usage; InvalidReply if not one."""
    if not isinstance(chunk, dict):
        raise InvalidReply(f"a streamed chunk is not a JSON object: {chunk!r:.200}")
    usage = _usage_of(chunk)
    choices = chunk.get("choices") or []
    if not isinstance(choices, list) or not choices:
        return Part(usage=usage)
    choice = choices[0]
    if not isinstance(choice, dict):
        raise InvalidReply(f"a streamed choice is not a JSON object: {choice!r:.200}")
    delta = choice.get("delta") or choice.get("message") or {}
    if not isinstance(delta, dict):
        delta = {}
    text = delta.get("content")
    thought = next((delta[name] for name in REASONING_FIELDS if delta.get(name)), "")
    return Part(
        text=text if isinstance(text, str) else "",
        reasoning=thought if isinstance(thought, str) else "",
        finish_reason=choice.get("finish_reason"),
        usage=usage,
    )


def int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Splitting:
    """Text deltas with inline `<think>` moved to the reasoning."""

    def __init__(self) -> None:
        self._splitter = ThinkSplitter()
        self.thought = False

    def part(self, part: Part) -> Part:
        reasoning, text = self._splitter.feed(part.text) if part.text else ("", "")
        part.text = text
        part.reasoning = part.reasoning + reasoning
        if part.finish_reason:
            part = self.flush(part)
        self.thought = self.thought or bool(part.reasoning)
        return part

    def flush(self, part: Part) -> Part:
        """`part` with what was held back to tell a tag (the reply's end)."""
        more_reasoning, more_text = self._splitter.flush()
        part.reasoning += more_reasoning
        part.text += more_text
        return part


# ----------------------------------------------------------------------------- requests


def request_body(
    *,
    limits: ModelLimits,
    messages: list[dict],
    max_tokens: int | None,
    temperature: float | None,
    extra: dict | None = None,
) -> dict:
    """The request: max_tokens always, at most the role's cap. (No num_ctx to Ollama: its /v1
    ignores it, so the window budgeted for is the one Ollama runs the model with.)"""
    body: dict = {
        "model": limits.model,
        "messages": messages,
        "max_tokens": min(max_tokens or limits.reply_cap, limits.reply_cap) or limits.reply_cap,
    }
    if temperature is not None:
        body["temperature"] = temperature
    body.update(extra or {})
    return body


def metric_model(model: str, base_url: str, config: RuntimeConfig | None = None) -> str:
    """The model's metrics label: a model the runtime configuration names or the server lists
    (as last read), else "other", so no caller can create unbounded series."""
    config = config or runtime_config()
    configured = {endpoint.model for role in ROLES for endpoint in role_endpoints(role, config)}
    if model in configured:
        return model
    listed = cache.get(models_key(base_url))
    if listed and listed.get("models") and model_listed(model, listed["models"]):
        return model
    return OTHER_MODEL


def record(role: str, endpoint: Endpoint, config: RuntimeConfig, **figures) -> None:
    record_llm_call(
        role=role, model=metric_model(endpoint.model, endpoint.base_url, config), **figures
    )


def record_reply(
    role: str, endpoint: Endpoint, config: RuntimeConfig, reply: Reply, *, ttft, started: float
) -> None:
    record(
        role,
        endpoint,
        config,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        ttft_s=ttft,
        latency_s=time.monotonic() - started,
        error=None,
    )


def failed_entry(endpoint: Endpoint, error: LLMError) -> dict:
    return {"model": endpoint.model, "base_url": endpoint.base_url, "error": error.reason[:200]}
