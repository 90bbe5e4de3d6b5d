"""What each model in use can take: its endpoint, context window, reply cap and token count.

A local server has a fixed context window (4,096 tokens is common). llama.cpp refuses a longer
prompt with HTTP 400; Ollama silently drops the start of it, which is where the system prompt
with the user's memories sits. So every prompt is fitted to the window minus the reply's cap,
and the window is read from the server where it tells: llama.cpp `GET /props`, Ollama
`POST /api/show` and `GET /api/ps`, vLLM's `max_model_len` in `/v1/models`; otherwise the
runtime setting.

Tokens are estimated from characters, with a ratio per model calibrated from the usage figures
the server returns (and from llama.cpp's own count when it refuses a prompt).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from django.conf import settings
from django.core.cache import cache

from apps.core.cache import redis_client
from apps.core.llm.reasoning import REASONING_ALLOWANCE, seen_key
from apps.core.llm.servers import (
    LIMITS_SECONDS,
    Endpoint,
    endpoint_models,
    facts_key,
    model_listed,
    server_facts,
)
from apps.core.models import FALLBACK_ROLES, RuntimeConfig, fallback_entry
from apps.core.selectors import cached_value, override_cache_key, prompt_text, runtime_config

logger = logging.getLogger(__name__)

CHAT, REFLECTION, CRITIC, EPISODE, TITLE, ROUTER, EMBEDDING = (
    "chat",
    "reflection",
    "critic",
    "episode",
    "title",
    "router",
    "embedding",
)
ROLES = (CHAT, REFLECTION, CRITIC, EPISODE, TITLE, ROUTER, EMBEDDING)
# Every role but the chat runs after the answer, and waits for or gives way to answers: no turn
# waits for an LLM call but its own answer's (the router's model is the world modifier's).
BACKGROUND_ROLES = (REFLECTION, CRITIC, EPISODE, TITLE, ROUTER)
TITLE_MAX_TOKENS = 32
# Before the server has told us anything: fewer characters per token than most text has, so
# the first prompts are estimated long rather than short.
DEFAULT_CHARS_PER_TOKEN = 3.2
# A calibration outside this range is not a tokenizer's (a truncated prompt looks like one).
CHARS_PER_TOKEN_RANGE = (1.5, 7.0)
# Chat templates add a few tokens per message (role markers, separators).
TOKENS_PER_MESSAGE = 6
# Tokens kept free besides the reply's cap: the estimate is an estimate.
SAFETY_TOKENS = 64
# A prompt the server reports as less than this share of what was sent lost its start.
TRUNCATED_BELOW = 0.6


def role_endpoint(role: str, config: RuntimeConfig | None = None) -> Endpoint:
    """The server and model a role's calls go to; a background role falls back to the chat's."""
    config = config or runtime_config()
    chat = Endpoint(
        config.llm_base_url or settings.THALAMUS_LLM_BASE_URL,
        config.chat_model or settings.THALAMUS_CHAT_MODEL,
    )
    if role == CHAT:
        return chat
    if role == EMBEDDING:
        return Endpoint(
            config.embed_base_url or settings.THALAMUS_EMBED_BASE_URL or chat.base_url,
            config.embed_model or settings.THALAMUS_EMBED_MODEL,
        )
    if role not in BACKGROUND_ROLES:
        raise ValueError(f"unknown LLM role {role!r}")
    return Endpoint(
        getattr(config, f"{role}_base_url") or chat.base_url,
        getattr(config, f"{role}_model") or chat.model,
    )


def fallback_endpoint(entry: str, base_url: str) -> Endpoint:
    """One entry of a role's fallback chain; a bare model is on the role's own server."""
    endpoint, model = fallback_entry(entry)
    return Endpoint(endpoint or base_url, model)


def role_endpoints(role: str, config: RuntimeConfig | None = None) -> list[Endpoint]:
    """The chain a role's calls try in order: its own endpoint, then its fallbacks."""
    config = config or runtime_config()
    primary = role_endpoint(role, config)
    chain = [primary]
    if role not in FALLBACK_ROLES:
        return chain
    for entry in (config.model_fallbacks or {}).get(role) or []:
        try:
            endpoint = fallback_endpoint(entry, primary.base_url)
        except ValueError as exc:  # clean() refuses these; a row written around it is logged
            logger.warning("the %s fallback %s", role, exc)
            continue
        if endpoint not in chain:
            chain.append(endpoint)
    return chain


@dataclass(frozen=True)
class ModelLimits:
    role: str
    base_url: str
    model: str
    context: int
    reply_cap: int
    server: str
    source: str

    @property
    def prompt_budget(self) -> int:
        """Tokens the prompt may take: the window minus the reply's cap and a margin."""
        return max(self.context - self.reply_cap - SAFETY_TOKENS, 0)

    def as_dict(self) -> dict:
        return {**asdict(self), "prompt_budget": self.prompt_budget}


def model_limits(
    role: str,
    config: RuntimeConfig | None = None,
    endpoint: Endpoint | None = None,
    *,
    cached: Mapping | None = None,
) -> ModelLimits:
    """A role's limits at its own endpoint, or at `endpoint` (one of its fallbacks).

    `cached`: what one `cache.get_many` of `endpoint_cache_keys` already read.
    """
    config = config or runtime_config()
    endpoint = endpoint or role_endpoint(role, config)
    facts = server_facts(endpoint, cached=cached)
    learnt = cached_value(_learnt_context_key(endpoint), cached)
    context = learnt or facts.context or config.context_tokens
    source = "the server's refusal" if learnt else facts.source
    if role == CHAT:
        cap = config.answer_max_tokens
    elif role == TITLE:
        cap = TITLE_MAX_TOKENS
    elif role == EMBEDDING:
        cap = 0
    else:
        cap = config.background_max_tokens
    if cap and cached_value(seen_key(endpoint.key), cached):
        # A model seen thinking writes its thinking inside the same cap as its reply.
        cap += REASONING_ALLOWANCE
    # A cap that leaves no room for a prompt is no cap: at most half the window.
    cap = min(cap, context // 2)
    return ModelLimits(
        role=role,
        base_url=endpoint.base_url,
        model=endpoint.model,
        context=context,
        reply_cap=cap,
        server=facts.server,
        source=source,
    )


def _learnt_context_key(endpoint: Endpoint) -> str:
    return f"llm:learnt-context:{endpoint.key}"


def endpoint_cache_keys(endpoint: Endpoint) -> list[str]:
    """The cache keys of what is known of an endpoint's model: its window and token ratio."""
    return [
        facts_key(endpoint),
        seen_key(endpoint.key),
        _learnt_context_key(endpoint),
        _ratio_key(endpoint),
    ]


def forget_model_limits(endpoint: Endpoint | None = None) -> None:
    """Ask the servers again on next use (after a model or endpoint change, and in tests)."""
    if endpoint is not None:
        cache.delete_many(endpoint_cache_keys(endpoint))
        return
    client = redis_client()
    pattern = cache.make_key("llm:*")
    keys = list(client.scan_iter(match=pattern, count=500))
    if keys:
        client.delete(*keys)


# What an endpoint without a key of its own is sent (the openai SDK insists on some key, and
@dataclass(frozen=True)
class ConfiguredModel:
    role: str
    model: str
    base_url: str
    fallback: bool
    # None: the server could not be asked.
    listed: bool | None
    # Not listed, and the server would refuse it (llama.cpp serves its one loaded model
    # whatever a request names).
    missing: bool

    @property
    def fix(self) -> str:
        kind = "fallback" if self.fallback else "model"
        return (
            f"{self.model} (the {self.role} {kind}) is not among the models {self.base_url} "
            f"lists: pull or load it there, or choose a listed one in the runtime configuration."
        )


def configured_models(config: RuntimeConfig | None = None) -> list[ConfiguredModel]:
    """Every model a role uses, its fallbacks included, and whether its server lists it."""
    config = config or runtime_config()
    found = []
    for role in ROLES:
        for position, endpoint in enumerate(role_endpoints(role, config)):
            models = endpoint_models(endpoint.base_url)
            listed = None if models is None else model_listed(endpoint.model, models)
            found.append(
                ConfiguredModel(
                    role=role,
                    model=endpoint.model,
                    base_url=endpoint.base_url,
                    fallback=position > 0,
                    listed=listed,
                    missing=listed is False and server_facts(endpoint).server != "llama.cpp",
                )
            )
    return found


# ----------------------------------------------------------------------------- token counts


def _ratio_key(endpoint: Endpoint) -> str:
    return f"llm:chars-per-token:{endpoint.key}"


@dataclass(frozen=True)
class TokenCounter:
    """The one token estimator: characters over a ratio calibrated for one model."""

    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
    calibrated: bool = False

    def text(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def messages(self, messages: list[dict]) -> int:
        return sum(self.text(_content(m)) + TOKENS_PER_MESSAGE for m in messages)


def token_counter(endpoint: Endpoint, *, cached: Mapping | None = None) -> TokenCounter:
    ratio = cached_value(_ratio_key(endpoint), cached)
    if ratio is None:
        return TokenCounter()
    return TokenCounter(float(ratio), True)


def _content(message: dict) -> str:
    content = message.get("content")
    content = content if isinstance(content, str) else ""
    if message.get("tool_calls"):
        # The calls a model made are in its prompt next round, as the template renders them.
        content += json.dumps(message["tool_calls"])
    return content


def _chars(messages: list[dict]) -> int:
    return sum(len(_content(m)) for m in messages)


def usage_check(
    *, endpoint: Endpoint, messages: list[dict], prompt_tokens: int | None, role: str
) -> bool:
    """Learn from the prompt tokens a server reports; False when it dropped part of the prompt.

    A server that silently truncates (Ollama beyond num_ctx) reports far fewer prompt tokens
    than were sent: that is recorded as a warning, and the report is not used to calibrate.
    """
    if not prompt_tokens or prompt_tokens <= 0:
        return True
    counter = token_counter(endpoint)
    expected = counter.messages(messages)
    measured = (_chars(messages)) / max(prompt_tokens - TOKENS_PER_MESSAGE * len(messages), 1)
    low, high = CHARS_PER_TOKEN_RANGE
    truncated = prompt_tokens < TRUNCATED_BELOW * expected and (
        counter.calibrated or measured > high
    )
    if truncated:
        truncation_warn(
            endpoint=endpoint, role=role, sent_estimate=expected, reported=prompt_tokens
        )
        return False
    if low <= measured <= high and _chars(messages) >= 200:
        previous = cache.get(_ratio_key(endpoint))
        ratio = measured if previous is None else 0.7 * float(previous) + 0.3 * measured
        cache.set(_ratio_key(endpoint), round(ratio, 4), None)
    return True


_CONTEXT_REFUSAL = re.compile(
    r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"
)


def learn_from_refusal(*, endpoint: Endpoint, messages: list[dict], error: str) -> bool:
    """llama.cpp's refusal of a long prompt states both counts: learn the window and the ratio.

    True when the error was such a refusal (the caller may fit the prompt again and retry).
    """
    match = _CONTEXT_REFUSAL.search(error or "")
    if not match:
        return False
    prompt_tokens, context = int(match.group(1)), int(match.group(2))
    cache.set(_learnt_context_key(endpoint), context, LIMITS_SECONDS)
    measured = _chars(messages) / max(prompt_tokens - TOKENS_PER_MESSAGE * len(messages), 1)
    low, high = CHARS_PER_TOKEN_RANGE
    if low <= measured <= high:
        cache.set(_ratio_key(endpoint), round(measured, 4), None)
    return True


# ----------------------------------------------------------------------------- truncation


def _truncation_key(endpoint: Endpoint) -> str:
    return f"llm:truncated:{endpoint.key}"


TRUNCATION_WARNING_SECONDS = 24 * 3600


def truncation_warn(*, endpoint: Endpoint, role: str, sent_estimate: int, reported: int) -> None:
    from apps.core.models import Event
    from apps.core.services import event_record

    warning = {
        "base_url": endpoint.base_url,
        "model": endpoint.model,
        "role": role,
        "sent_tokens_estimate": sent_estimate,
        "reported_prompt_tokens": reported,
        "fix": (
            "The server dropped the start of the prompt (where the system prompt and the "
            "user's memories are). Raise its context window (Ollama: num_ctx in a Modelfile, "
            "or OLLAMA_CONTEXT_LENGTH) to at least the runtime setting's context_tokens, or "
            f"lower context_tokens to about {max(reported, 512)}; for Ollama, set "
            "THALAMUS_OLLAMA_CONTEXT_LENGTH to its OLLAMA_CONTEXT_LENGTH."
        ),
    }
    first = cache.add(_truncation_key(endpoint), warning, TRUNCATION_WARNING_SECONDS)
    cache.set(_truncation_key(endpoint), warning, TRUNCATION_WARNING_SECONDS)
    if first:
        event_record(
            kind=Event.Kind.WARNING,
            summary=(
                f"{endpoint.model} at {endpoint.base_url} read only {reported} of about "
                f"{sent_estimate} prompt tokens: it silently truncates prompts"
            ),
            payload=warning,
        )


def truncation_warnings(config: RuntimeConfig | None = None) -> list[dict]:
    """The silent truncations seen in the last day, for each endpoint in use."""
    config = config or runtime_config()
    endpoints = {role_endpoint(role, config) for role in ROLES if role != EMBEDDING}
    found = cache.get_many([_truncation_key(endpoint) for endpoint in endpoints])
    return list(found.values())


def prompt_and_limits(
    name: str, role: str, config: RuntimeConfig | None = None
) -> tuple[str, ModelLimits, TokenCounter]:
    """Template `name` and `role`'s limits and token counter, read in one cache round trip.

    On a busy web process every round trip waits for the GIL on its way back; the turn's path
    reads these together rather than one by one.
    """
    config = config or runtime_config()
    endpoint = role_endpoint(role, config)
    cached = cache.get_many([override_cache_key(name), *endpoint_cache_keys(endpoint)])
    return (
        prompt_text(name, cached=cached),
        model_limits(role, config, endpoint, cached=cached),
        token_counter(endpoint, cached=cached),
    )


def all_model_limits(config: RuntimeConfig | None = None) -> list[ModelLimits]:
    config = config or runtime_config()
    return [model_limits(role, config) for role in ROLES]
