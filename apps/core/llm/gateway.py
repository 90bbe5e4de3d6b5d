"""The one door to the LLM: every call names its role and gives its prompt; the rest happens here.

For each call the gateway
- resolves the role's endpoint and model, then walks its fallback chain (`role_endpoints`) when
  an endpoint fails (unreachable, too slow, a model it does not have);
- fits the prompt to each candidate's own window and reply cap (`Room`), counting what it adds
  itself (a schema written into the prompt, tool definitions) inside the budget, and never sends
  a prompt over the window; a server that refuses a prompt as too long teaches the window and
  the prompt is fitted again once;
- always sends max_tokens; the window is the one the server runs the model with (Ollama's
  /v1 takes no num_ctx: `servers`);
- puts the chat first: a background call runs in a slot the server has spare, else waits
  while an answer streams from it, and is preempted by one that starts: its stream closed,
  `Preempted` raised for its task to run again later (`priority`); a call the user waits for
  holds its slot as an answer does;
- separates a reasoning model's thinking from its reply (`reasoning`);
- counts every request in the LLM metrics, with bounded labels;
- reports failures as the outcomes of `apps.core.llm.outcomes`, never the SDK's exceptions.

Calls: `complete` (a reply, background or foreground), `complete_as` in `structured` (a reply of
a Pydantic model's shape), `streaming.stream` (the chat's answer, async), `embed` and
`models_of`. What a request and a reply look like, and how a call is counted, is in `replies`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from apps.core.llm import clients, priority
from apps.core.llm.clients import FormatRefused, falls_back, outcome_of
from apps.core.llm.fitting import Prompt, Room, messages_for
from apps.core.llm.limits import (
    CHAT,
    learn_from_refusal,
    model_limits,
    role_endpoints,
    token_counter,
    usage_check,
)
from apps.core.llm.outcomes import InvalidReply, LLMError, Preempted, TimedOut, TooLong
from apps.core.llm.reasoning import (
    reasoning_seen,
    split_reasoning,
)
from apps.core.llm.replies import (
    Part,
    Reply,
    Splitting,
    failed_entry,
    int_or_none,
    read_chunk,
    record,
    record_reply,
    request_body,
)
from apps.core.llm.servers import Endpoint, server_facts
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- complete


@dataclass(frozen=True)
class Ladder:
    """How an endpoint is asked for structured output: `request(endpoint)` gives the request's
    extra fields and an instruction for the end of the prompt; `step_down(endpoint)` is called
    when the endpoint refuses them, and says whether there is another step to try."""

    request: Callable[[Endpoint], tuple[dict, str]]
    step_down: Callable[[Endpoint], bool]


@dataclass(frozen=True)
class _Room:
    """A background call's place at its server: the server's slots and the call's mark."""

    slots: int
    call_id: str


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

    A background call runs in a slot the server has spare; else it waits while an answer
    streams from the same server (`background_wait_seconds`), and an answer that starts while
    it generates preempts it (raises `Preempted`, as does a wait that runs out). A foreground
    one (anything the user waits for: the tool loop, the debate's review) does neither, counts
    as an answer, and has the router's time limit.
    """
    config = config or runtime_config()
    if foreground is None:
        foreground = role == CHAT
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
        foreground=foreground,
    )
    chain = role_endpoints(role, config)
    failed: list[dict] = []
    first_too_long: TooLong | None = None
    for endpoint in chain:
        try:
            reply = call.at(endpoint)
        except LLMError as exc:
            if isinstance(exc, TooLong):
                first_too_long = first_too_long or exc
            elif not falls_back(exc):
                raise
            if endpoint == chain[-1]:
                raise (first_too_long or exc) from None
            failed.append(failed_entry(endpoint, exc))
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
    foreground: bool

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
        if self.foreground:
            return self._for_the_user(endpoint, body)
        if self.tools:
            return self._whole(endpoint, body)
        slots = server_facts(endpoint).slots
        call_id = uuid.uuid4().hex
        waited = priority.wait_for_room(
            endpoint.base_url, slots=slots, call_id=call_id, until=self.wait_until
        )
        # Marked for as long as it may take (a killed worker's mark lapses by itself).
        priority.background_mark(
            base_url=endpoint.base_url, call_id=call_id, seconds=self.timeout + 5
        )
        try:
            if not priority.room_for_background(endpoint.base_url, slots=slots, call_id=call_id):
                raise Preempted(
                    f"answers held {endpoint.model} for all of the {waited:.0f} s a background "
                    "call waits",
                    base_url=endpoint.base_url,
                    model=endpoint.model,
                )
            reply = self._streamed(endpoint, body, give_way=_Room(slots, call_id))
        finally:
            priority.background_clear(base_url=endpoint.base_url, call_id=call_id)
        reply.waited_seconds = round(waited, 3)
        return reply

    def _for_the_user(self, endpoint: Endpoint, body: dict) -> Reply:
        """A call on the turn's path (the tool loop) holds a slot as an answer does: background
        calls make room for it."""
        call_id = uuid.uuid4().hex
        priority.chat_active_mark(base_url=endpoint.base_url, call_id=call_id)
        try:
            if self.tools:
                return self._whole(endpoint, body)
            return self._streamed(endpoint, body, give_way=None)
        finally:
            priority.chat_active_clear(base_url=endpoint.base_url, call_id=call_id)

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
            self._failed(endpoint, exc, started=started, ttft=None)
            raise
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        part = read_chunk({"choices": [{"delta": message, "finish_reason": finish}]})
        reasoning, text = split_reasoning(part.text)
        reply = Reply(
            content=text,
            reasoning=part.reasoning + reasoning,
            finish_reason=finish,
            prompt_tokens=int_or_none(usage.get("prompt_tokens")),
            completion_tokens=int_or_none(usage.get("completion_tokens")),
            tool_calls=[call for call in message.get("tool_calls") or [] if isinstance(call, dict)],
        )
        record_reply(self.role, endpoint, self.config, reply, ttft=None, started=started)
        return reply

    def _streamed(self, endpoint: Endpoint, body: dict, *, give_way: _Room | None) -> Reply:
        """Stream one reply to its end; with `give_way`, yield to an answer that needs the
        slot (`priority.room_for_background`) and raise `Preempted`.

        A watcher thread closes the response the moment the room is gone: the server may still
        be reading the prompt (no chunk arrives for seconds on a CPU), and closing makes it stop
        and free its slot. Counted in the metrics either way (a preempted call as an error of
        kind "preempted").
        """
        started = time.monotonic()
        ttft = None
        texts: list[str] = []
        thoughts: list[str] = []
        finish_reason = None
        usage = None
        closed = threading.Event()
        gave_way = threading.Event()
        splitting = Splitting()
        stream = None

        def give_way_when_the_chat_starts() -> None:
            while not closed.wait(priority.GIVE_WAY_CHECK_SECONDS):
                if not priority.room_for_background(
                    endpoint.base_url, slots=give_way.slots, call_id=give_way.call_id
                ):
                    gave_way.set()
                    clients.hang_up(stream.response)
                    return

        try:
            stream = clients.open_stream(
                endpoint.base_url,
                {**body, "stream_options": {"include_usage": True}},
                timeout=self.timeout,
            )
            if give_way is not None:
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
                # The stream closed under it: a read error, or the SDK's own.
                raise self._gave_way(endpoint, texts, started=started, ttft=ttft) from None
            error = outcome_of(exc, base_url=endpoint.base_url, model=endpoint.model)
            self._failed(endpoint, error, started=started, ttft=ttft)
            if error is exc:
                raise
            raise error from exc
        finally:
            closed.set()
        if gave_way.is_set() and finish_reason is None:
            raise self._gave_way(endpoint, texts, started=started, ttft=ttft)
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
        record_reply(self.role, endpoint, self.config, reply, ttft=ttft, started=started)
        return reply

    def _gave_way(
        self, endpoint: Endpoint, texts: list[str], *, started: float, ttft: float | None
    ) -> Preempted:
        """The call that closed its stream for the chat, counted; its outcome to raise."""
        error = Preempted(
            f"{self.role} gave {endpoint.model}'s slot to the chat after "
            f"{time.monotonic() - started:.1f} s",
            generated=len(texts),
            base_url=endpoint.base_url,
            model=endpoint.model,
        )
        self._failed(endpoint, error, started=started, ttft=ttft)
        return error

    def _failed(
        self, endpoint: Endpoint, error: LLMError, *, started: float, ttft: float | None
    ) -> None:
        record(
            self.role,
            endpoint,
            self.config,
            prompt_tokens=None,
            completion_tokens=None,
            ttft_s=ttft,
            latency_s=time.monotonic() - started,
            error=error.label,
        )


# ----------------------------------------------------------------------------- the rest


def embed(*, base_url: str, body: dict, timeout: float) -> object:
    """POST /embeddings; the reply as plain data. Raises outcomes."""
    return clients.post(base_url, "/embeddings", body, timeout=timeout)


def models_of(base_url: str, *, timeout: float) -> list[str]:
    """The models the server at `base_url` lists, asked now. Raises outcomes."""
    return clients.list_models(base_url, timeout=timeout)
