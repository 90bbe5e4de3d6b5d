"""The one door to the LLM: every call names its role and gives its prompt; the rest happens here.

For each call the gateway
- resolves the role's endpoint and model, then walks its fallback chain (`role_endpoints`) when
  an endpoint fails (unreachable, too slow, a model it does not have);
- fits the prompt to each candidate's own window and reply cap (`Room`), counting what it adds
  itself (a schema written into the prompt, tool definitions) inside the budget, and never sends
  a prompt over the window; a server that refuses a prompt as too long teaches the window and
  the prompt is fitted again once;
- always sends max_tokens, and to Ollama the window it is budgeted for;
- puts the chat first: a background call waits while an answer streams from the same server
  and gives way to one that starts (`priority`);
- separates a reasoning model's thinking from its reply (`reasoning`);
- counts every request in the LLM metrics, with bounded labels;
- reports failures as the outcomes of `apps.core.llm.outcomes`, never the SDK's exceptions.

Calls: `complete` (a reply, background or foreground), `complete_as` in `structured` (a reply of
a Pydantic model's shape), `stream` (the chat's answer, async), `embed` and `models_of`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.core.cache import cache

from apps.core.llm import clients, priority
from apps.core.llm.clients import FormatRefused, falls_back, outcome_of
from apps.core.llm.fitting import Prompt, Room, messages_for
from apps.core.llm.limits import (
    CHAT,
    FOREGROUND_ROLES,
    ROLES,
    ModelLimits,
    endpoint_cache_keys,
    learn_from_refusal,
    model_limits,
    role_endpoints,
    token_counter,
    usage_check,
)
from apps.core.llm.outcomes import InvalidReply, LLMError, TimedOut, TooLong
from apps.core.llm.reasoning import (
    REASONING_FIELDS,
    ThinkSplitter,
    reasoning_seen,
    split_reasoning,
)
from apps.core.llm.servers import Endpoint, model_listed, models_key
from apps.core.metrics import record_llm_call
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

logger = logging.getLogger(__name__)

OTHER_MODEL = "other"


@dataclass
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None


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
    gave_way: int = 0
    # The endpoint that answered, and those of the role's chain that failed before it.
    model: str = ""
    base_url: str = ""
    fallback_from: list[dict] = field(default_factory=list)
    # The messages as sent, fitted to that endpoint's window.
    messages: list[dict] = field(default_factory=list)


@dataclass
class Answering:
    """What `stream` tells its caller about the answer under way."""

    endpoint: Endpoint | None = None
    room: Room | None = None
    messages: list[dict] = field(default_factory=list)
    # The endpoints that failed, in order (every one, when the answer failed).
    fallback_from: list[dict] = field(default_factory=list)


# ----------------------------------------------------------------------------- chunks


def read_chunk(chunk: object) -> Part:
    """A streamed chunk's text, thinking, finish reason and usage; InvalidReply if not one."""
    if not isinstance(chunk, dict):
        raise InvalidReply(f"a streamed chunk is not a JSON object: {chunk!r:.200}")
    usage = chunk.get("usage")
    usage = (
        Usage(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))
        if isinstance(usage, dict)
        else None
    )
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


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _Splitting:
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
    """The request: max_tokens always (at most the role's cap), and to Ollama the window."""
    body: dict = {
        "model": limits.model,
        "messages": messages,
        "max_tokens": min(max_tokens or limits.reply_cap, limits.reply_cap) or limits.reply_cap,
    }
    if temperature is not None:
        body["temperature"] = temperature
    if limits.server == "ollama":
        body["options"] = {"num_ctx": limits.context}
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


def _record(role: str, endpoint: Endpoint, config: RuntimeConfig, **figures) -> None:
    record_llm_call(
        role=role, model=metric_model(endpoint.model, endpoint.base_url, config), **figures
    )


def _record_reply(
    role: str, endpoint: Endpoint, config: RuntimeConfig, reply: Reply, *, ttft, started: float
) -> None:
    _record(
        role,
        endpoint,
        config,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        ttft_s=ttft,
        latency_s=time.monotonic() - started,
        error=None,
    )


def _failed_entry(endpoint: Endpoint, error: LLMError) -> dict:
    return {"model": endpoint.model, "base_url": endpoint.base_url, "error": error.reason[:200]}


# ----------------------------------------------------------------------------- complete


@dataclass(frozen=True)
class Ladder:
    """How an endpoint is asked for structured output: `request(endpoint)` gives the request's
    extra fields and an instruction for the end of the prompt; `step_down(endpoint)` is called
    when the endpoint refuses them, and says whether there is another step to try."""

    request: Callable[[Endpoint], tuple[dict, str]]
    step_down: Callable[[Endpoint], bool]


class _GaveWay(Exception):
    pass


def complete(
    *,
    role: str,
    prompt: Prompt,
    max_tokens: int | None = None,
    temperature: float | None = 0.2,
    done: Callable[[str], bool] | None = None,
    ladder: Ladder | None = None,
    tools: list[dict] | None = None,
    foreground: bool | None = None,
    config: RuntimeConfig | None = None,
) -> Reply:
    """One call of `role`, walked down its fallback chain; raises outcomes.

    `done(text so far)` may end the reply early: a model without end of sequence would write on
    after its JSON until max_tokens, holding the server for nothing. `ladder`: structured output
    (see `Ladder`). `tools`: OpenAI tool definitions, counted in the budget;
    the reply is then read whole and its tool calls returned.

    A background call waits while an answer streams from the same server and gives way to one
    that starts; a foreground one (the router, the tool loop: on the turn's path) does neither
    and has the router's time limit.
    """
    config = config or runtime_config()
    if foreground is None:
        foreground = role in FOREGROUND_ROLES or role == CHAT
    call = _Call(
        role=role,
        config=config,
        prompt=prompt,
        max_tokens=max_tokens,
        temperature=temperature,
        done=done,
        ladder=ladder,
        tools=tools,
        timeout=float(
            config.router_timeout_seconds if foreground else config.background_timeout_seconds
        ),
        wait_until=time.monotonic() + (0 if foreground else config.background_wait_seconds),
    )
    *fallen_through, last = role_endpoints(role, config)
    failed: list[dict] = []
    first_too_long: TooLong | None = None
    for endpoint in [*fallen_through, last]:
        try:
            reply = call.at(endpoint)
        except LLMError as exc:
            if isinstance(exc, TooLong):
                first_too_long = first_too_long or exc
            elif not falls_back(exc):
                raise
            if endpoint == last:
                raise (first_too_long or exc) from None
            failed.append(_failed_entry(endpoint, exc))
            logger.warning("%s: %s at %s failed (%s)", role, endpoint.model, endpoint.base_url, exc)
            continue
        reply.fallback_from = failed
        return reply
    raise AssertionError("a role's chain is never empty")


@dataclass
class _Call:
    role: str
    config: RuntimeConfig
    prompt: Prompt
    max_tokens: int | None
    temperature: float | None
    done: Callable[[str], bool] | None
    ladder: Ladder | None
    tools: list[dict] | None
    timeout: float
    wait_until: float

    def at(self, endpoint: Endpoint) -> Reply:
        """The call at one endpoint: fitted to its window; once more after it refused the prompt
        as too long (its refusal states the window); once more per step of the structured
        ladder it refuses."""
        refitted = False
        while True:
            limits = model_limits(self.role, self.config, endpoint)
            counter = token_counter(endpoint)
            extra, instruction = self.ladder.request(endpoint) if self.ladder else ({}, "")
            if self.tools:
                extra = {**extra, "tools": self.tools, "tool_choice": "auto"}
            room = Room(limits, counter).less(
                counter.text(instruction)
                + (counter.text(json.dumps(self.tools)) if self.tools else 0)
            )
            messages = messages_for(self.prompt, room)
            if instruction:
                *earlier, last = messages
                messages = [*earlier, {**last, "content": f"{last['content']}\n\n{instruction}"}]
            body = request_body(
                limits=limits,
                messages=messages,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                extra=extra,
            )
            try:
                reply = self._send(endpoint, body)
            except FormatRefused:
                if self.ladder is None or not self.ladder.step_down(endpoint):
                    raise
                continue
            except TooLong as exc:
                if refitted or not learn_from_refusal(
                    endpoint=endpoint, messages=messages, error=str(exc)
                ):
                    raise
                refitted = True
                continue
            usage_check(
                endpoint=endpoint,
                messages=messages,
                prompt_tokens=reply.prompt_tokens,
                role=self.role,
            )
            reply.model, reply.base_url, reply.messages = (
                endpoint.model,
                endpoint.base_url,
                messages,
            )
            return reply

    def _send(self, endpoint: Endpoint, body: dict) -> Reply:
        if self.tools:
            return self._whole(endpoint, body)
        waited = 0.0
        gave_way = 0
        while True:
            waited += priority.wait_for_chat(endpoint.base_url, until=self.wait_until)
            # Within its wait (background_wait_seconds) a call gives way as often as answers
            # come; past it, it runs to its end, so a busy chat delays background work but
            # never starves it.
            may_give_way = time.monotonic() < self.wait_until
            try:
                reply = self._streamed(endpoint, body, give_way=may_give_way)
            except _GaveWay:
                gave_way += 1
                continue
            reply.waited_seconds, reply.gave_way = round(waited, 3), gave_way
            return reply

    def _whole(self, endpoint: Endpoint, body: dict) -> Reply:
        started = time.monotonic()
        try:
            data = clients.post(
                endpoint.base_url,
                "/chat/completions",
                {**body, "stream": False},
                timeout=self.timeout,
            )
            try:
                message = data["choices"][0]["message"]
                finish = data["choices"][0].get("finish_reason")
            except (KeyError, IndexError, TypeError) as exc:
                raise InvalidReply(f"{endpoint.model}'s reply is not a chat completion") from exc
            if not isinstance(message, dict):
                raise InvalidReply(f"{endpoint.model}'s reply has no message")
        except LLMError as exc:
            _record(
                self.role,
                endpoint,
                self.config,
                prompt_tokens=None,
                completion_tokens=None,
                ttft_s=None,
                latency_s=time.monotonic() - started,
                error=exc.label,
            )
            raise
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        part = read_chunk({"choices": [{"delta": message, "finish_reason": finish}]})
        reasoning, text = split_reasoning(part.text)
        reply = Reply(
            content=text,
            reasoning=part.reasoning + reasoning,
            finish_reason=finish,
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            tool_calls=[call for call in message.get("tool_calls") or [] if isinstance(call, dict)],
        )
        _record_reply(self.role, endpoint, self.config, reply, ttft=None, started=started)
        return reply

    def _streamed(self, endpoint: Endpoint, body: dict, *, give_way: bool) -> Reply:
        """Stream one reply to its end; with `give_way`, yield to an answer that starts.

        A watcher thread closes the response the moment an answer starts: the server may still
        be reading the prompt (no chunk arrives for seconds on a CPU), and closing frees its
        slot. Counted in the metrics unless it gave way (it is asked again).
        """
        started = time.monotonic()
        ttft = None
        texts: list[str] = []
        thoughts: list[str] = []
        finish_reason = None
        usage = None
        closed = threading.Event()
        gave_way = threading.Event()
        splitting = _Splitting()
        stream = None

        def give_way_when_the_chat_starts() -> None:
            while not closed.wait(priority.GIVE_WAY_CHECK_SECONDS):
                if priority.chat_active(endpoint.base_url):
                    gave_way.set()
                    clients.hang_up(stream.response)
                    return

        try:
            stream = clients.open_stream(
                endpoint.base_url,
                {**body, "stream_options": {"include_usage": True}},
                timeout=self.timeout,
            )
            if give_way:
                threading.Thread(target=give_way_when_the_chat_starts, daemon=True).start()
            with clients.sdk_errors(endpoint.base_url, endpoint.model), stream:
                for chunk in stream:
                    part = splitting.part(read_chunk(chunk))
                    usage = part.usage or usage
                    finish_reason = part.finish_reason or finish_reason
                    if part.reasoning:
                        thoughts.append(part.reasoning)
                    if part.text:
                        ttft = ttft if ttft is not None else time.monotonic() - started
                        texts.append(part.text)
                        if self.done is not None and "}" in part.text and self.done("".join(texts)):
                            finish_reason = finish_reason or "stop"
                            clients.hang_up(stream.response)
                            break
                    if time.monotonic() - started > self.timeout:
                        raise TimedOut(
                            f"{endpoint.model} took too long to answer",
                            base_url=endpoint.base_url,
                            model=endpoint.model,
                        )
        except Exception as exc:
            if gave_way.is_set():
                raise _GaveWay from None
            error = outcome_of(exc, base_url=endpoint.base_url, model=endpoint.model)
            _record(
                self.role,
                endpoint,
                self.config,
                prompt_tokens=None,
                completion_tokens=None,
                ttft_s=ttft,
                latency_s=time.monotonic() - started,
                error=error.label,
            )
            if error is exc:
                raise
            raise error from exc
        finally:
            closed.set()
        if gave_way.is_set() and finish_reason is None:
            raise _GaveWay
        # A reply ended early (`done`) may still hold the start of what looked like a tag.
        held = splitting.flush(Part())
        texts.append(held.text)
        thoughts.append(held.reasoning)
        if splitting.thought:
            reasoning_seen(endpoint.key)
        reply = Reply(
            content="".join(texts),
            reasoning="".join(thoughts),
            finish_reason=finish_reason,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
        )
        _record_reply(self.role, endpoint, self.config, reply, ttft=ttft, started=started)
        return reply


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
) -> AsyncIterator[Part]:
    """The chat's answer, streamed; raises outcomes.

    An endpoint that fails before its first part hands the answer to the next of the chain,
    with the prompt fitted again to that model's window; `answering` then names the endpoint
    that answered, the messages it was sent and what failed before it. While the answer
    streams, its server is marked busy, so background calls wait or give way. `endpoint`: that
    endpoint only (an API client's choice of model, the model that drafted), no chain.
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
            failed.append(_failed_entry(endpoint, exc))
            if last:
                raise (first_too_long or exc) from None
            continue
        async for part in _rest(parts, first, endpoint, marking, call_id, role, config, answering):
            yield part
        return


def _off_loop(function):
    return sync_to_async(function, thread_sensitive=False)


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
        room, messages = await _off_loop(_fitted)(role, config, endpoint, prompt)
        body = request_body(
            limits=room.limits,
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            extra={**sampling, "stream_options": {"include_usage": True}},
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
            await _off_loop(_record)(
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
    splitting = _Splitting()
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
    _record(
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


# ----------------------------------------------------------------------------- the rest


def embed(*, base_url: str, body: dict, timeout: float) -> object:
    """POST /embeddings; the reply as plain data. Raises outcomes."""
    return clients.post(base_url, "/embeddings", body, timeout=timeout)


def models_of(base_url: str, *, timeout: float) -> list[str]:
    """The models the server at `base_url` lists, asked now. Raises outcomes."""
    return clients.list_models(base_url, timeout=timeout)
