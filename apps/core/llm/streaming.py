"""The chat's answer, streamed through the gateway: fitted to each model of the chain in turn,
the model's server marked busy while it streams, the call counted when it ends."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.core.cache import cache

from apps.core.llm import clients, priority
from apps.core.llm.clients import falls_back
from apps.core.llm.fitting import Prompt, Room, messages_for
from apps.core.llm.limits import (
    CHAT,
    endpoint_cache_keys,
    learn_from_refusal,
    model_limits,
    role_endpoints,
    token_counter,
    usage_check,
)
from apps.core.llm.outcomes import LLMError, TooLong
from apps.core.llm.reasoning import (
    reasoning_seen,
)
from apps.core.llm.replies import (
    Part,
    Reply,
    Splitting,
    failed_entry,
    read_chunk,
    record,
    request_body,
)
from apps.core.llm.servers import Endpoint
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

# Against an answer that says itself again (SmolLM2-135M looped for 23 s of a one-slot server):
# llama.cpp's DRY sampler (off unless dry_multiplier is set; its author's suggested values) and
# its repeat penalty, on by default. Ollama's /v1 documents neither (its repeat_penalty is an
# option of its own /api only, 1.1 unless a Modelfile says otherwise), and other servers may
# refuse a field they do not know: they are sent nothing. The client's own fields come after.
REPEATS_AVOIDED: dict[str, dict] = {
    "llama.cpp": {
        "dry_multiplier": 0.8,
        "dry_base": 1.75,
        "dry_allowed_length": 2,
        "repeat_penalty": 1.1,
        "repeat_last_n": 256,
    },
}


@dataclass
class Answering:
    """What `stream` tells its caller about the answer under way."""

    endpoint: Endpoint | None = None
    room: Room | None = None
    messages: list[dict] = field(default_factory=list)
    # The endpoints that failed, in order (every one, when the answer failed).
    fallback_from: list[dict] = field(default_factory=list)


# ----------------------------------------------------------------------------- the answer


async def stream(
    *,
    prompt: Prompt,
    answering: Answering,
    temperature: float | None,
    sampling: dict | None = None,
    max_tokens: int | None = None,
    endpoint: Endpoint | None = None,
    role: str = CHAT,
    config: RuntimeConfig | None = None,
    fitted_to: Room | None = None,
) -> AsyncIterator[Part]:
    """The chat's answer, streamed; raises outcomes.

    An endpoint that fails before its first part hands the answer to the next of the chain,
    with the prompt fitted again to that model's window; `answering` then names the endpoint
    that answered, the messages it was sent and what failed before it. While the answer
    streams, its server is marked busy, so background calls wait or give way. `endpoint`: that
    endpoint only (an API client's choice of model, the model that drafted), no chain.
    `fitted_to`: the room the prompt was already fitted to while the turn was prepared (the
    chat's own model's, read then); the model it belongs to is asked without reading it again.
    """
    # The configuration the turn was prepared with: the chain is read from it on the loop,
    # with no round trip before the request.
    config = config or await _off_loop(runtime_config)()
    chain = [endpoint] if endpoint else role_endpoints(role, config)
    failed = answering.fallback_from
    first_too_long: TooLong | None = None
    for index, endpoint in enumerate(chain):
        last = index == len(chain) - 1
        call_id = uuid.uuid4().hex
        # The server is marked busy beside the request, not before it.
        marking = asyncio.ensure_future(
            _off_loop(priority.chat_active_mark)(base_url=endpoint.base_url, call_id=call_id)
        )
        try:
            parts, first = await _open_answer(
                endpoint,
                fitted_to=fitted_to,
                role=role,
                config=config,
                prompt=prompt,
                answering=answering,
                temperature=temperature,
                sampling=sampling or {},
                max_tokens=max_tokens,
            )
        except LLMError as exc:
            await marking
            await _off_loop(priority.chat_active_clear)(base_url=endpoint.base_url, call_id=call_id)
            if isinstance(exc, TooLong):
                first_too_long = first_too_long or exc
            elif not falls_back(exc):
                raise
            failed.append(failed_entry(endpoint, exc))
            if last:
                raise (first_too_long or exc) from None
            continue
        async for part in _rest(parts, first, endpoint, marking, call_id, role, config, answering):
            yield part
        return


def _off_loop(function):
    return sync_to_async(function, thread_sensitive=False)


def _belongs(room: Room, endpoint: Endpoint) -> bool:
    return (room.limits.base_url, room.limits.model) == (endpoint.base_url, endpoint.model)


def _fitted(role: str, config: RuntimeConfig, endpoint: Endpoint, prompt: Prompt):
    """The endpoint's room, read in one cache round trip, and the prompt fitted to it."""
    cached = cache.get_many(endpoint_cache_keys(endpoint))
    room = Room(
        model_limits(role, config, endpoint, cached=cached), token_counter(endpoint, cached=cached)
    )
    return room, messages_for(prompt, room)


async def _open_answer(
    endpoint: Endpoint,
    *,
    fitted_to: Room | None,
    role,
    config,
    prompt,
    answering,
    temperature,
    sampling,
    max_tokens,
):
    """Fit, send, and read the first part; a refusal as too long is learnt from and the prompt
    fitted again once."""
    for refitted in (False, True):
        if not refitted and fitted_to is not None and _belongs(fitted_to, endpoint):
            # Fitted moments ago: no thread hop nor round trip before the request.
            room, messages = fitted_to, messages_for(prompt, fitted_to)
        else:
            room, messages = await _off_loop(_fitted)(role, config, endpoint, prompt)
        body = request_body(
            limits=room.limits,
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            extra={
                **REPEATS_AVOIDED.get(room.limits.server, {}),
                **sampling,
                "stream_options": {"include_usage": True},
            },
        )
        answering.endpoint, answering.room, answering.messages = endpoint, room, messages
        started = time.monotonic()
        try:
            stream = await clients.aopen_stream(
                endpoint.base_url, body, timeout=clients.default_timeout()
            )
            parts = _parts_of(stream, endpoint)
            first = await anext(parts, None)
            return parts, (first, started)
        except LLMError as exc:
            await _off_loop(record)(
                role,
                endpoint,
                config,
                prompt_tokens=None,
                completion_tokens=None,
                ttft_s=None,
                latency_s=time.monotonic() - started,
                error=exc.label,
            )
            if (
                isinstance(exc, TooLong)
                and not refitted
                and await _off_loop(learn_from_refusal)(
                    endpoint=endpoint, messages=messages, error=str(exc)
                )
            ):
                continue
            raise
    raise AssertionError("unreachable")


async def _parts_of(stream, endpoint: Endpoint) -> AsyncIterator[Part]:
    splitting = Splitting()
    try:
        async with stream:
            with clients.sdk_errors(endpoint.base_url, endpoint.model):
                async for chunk in stream:
                    yield splitting.part(read_chunk(chunk))
    finally:
        if splitting.thought:
            await _off_loop(reasoning_seen)(endpoint.key)


async def _rest(parts, first, endpoint, marking, call_id, role, config, answering):
    """The answer's parts from the first on; the busy mark renewed, the call counted."""
    first_part, started = first
    ttft = None
    usage = None
    error: str | None = None
    renewing = asyncio.ensure_future(_renew_mark(endpoint.base_url, call_id))
    cancelled = False
    try:
        part = first_part
        while part is not None:
            usage = part.usage or usage
            if ttft is None and (part.text or part.reasoning):
                ttft = time.monotonic() - started
            yield part
            part = await anext(parts, None)
    except LLMError as exc:
        error = exc.label
        raise
    except (asyncio.CancelledError, GeneratorExit):
        cancelled = True
        raise
    finally:
        renewing.cancel()
        await parts.aclose()
        # The mark must be set before it is cleared.
        await asyncio.shield(marking)
        await asyncio.shield(
            _off_loop(_answer_done)(
                role=role,
                endpoint=endpoint,
                config=config,
                call_id=call_id,
                cancelled=cancelled,
                usage=usage,
                ttft=ttft,
                latency=time.monotonic() - started,
                error=error,
                messages=answering.messages,
            )
        )


def _answer_done(
    *, role, endpoint, config, call_id, cancelled, usage, ttft, latency, error, messages
) -> None:
    priority.chat_active_clear(base_url=endpoint.base_url, call_id=call_id)
    if cancelled:
        return
    record(
        role,
        endpoint,
        config,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        ttft_s=ttft,
        latency_s=latency,
        error=error,
    )
    if usage and usage.prompt_tokens:
        usage_check(
            endpoint=endpoint, messages=messages, prompt_tokens=usage.prompt_tokens, role=role
        )


async def _renew_mark(base_url: str, call_id: str) -> None:
    while True:
        await asyncio.sleep(priority.CHAT_ACTIVE_SECONDS / 3)
        await _off_loop(priority.chat_active_mark)(base_url=base_url, call_id=call_id)


async def collect(parts: AsyncIterator[Part]) -> Reply:
    """A streamed answer read whole (the debate's draft)."""
    reply = Reply()
    texts, thoughts = [], []
    async for part in parts:
        texts.append(part.text)
        thoughts.append(part.reasoning)
        reply.finish_reason = part.finish_reason or reply.finish_reason
        if part.usage:
            reply.prompt_tokens = part.usage.prompt_tokens
            reply.completion_tokens = part.usage.completion_tokens
    reply.content, reply.reasoning = "".join(texts), "".join(thoughts)
    return reply
