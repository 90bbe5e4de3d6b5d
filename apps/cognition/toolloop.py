"""The context builder's bounded tool loop: the chat model calls tools until it has its evidence.

One round is one request to the chat role's endpoint, then the tools it asked for. The model is
offered only the tools of the step's allowlist; a call to another, arguments that are not JSON
or break the tool's schema, a tool that fails or takes longer than the runtime setting's
`tool_timeout_seconds`: each becomes an observation the model reads in the next round, never an
exception. A tool left behind is also stopped: its database work ends at the deadline. At most
`tool_rounds` rounds; an LLM error ends the loop with what was gathered.

Local models are weak at tool calling, and some servers refuse the `tools` parameter
(llama.cpp without --jinja, Ollama for a model without a tool template). Such an endpoint gets
the same loop in text (ReAct): one JSON action per reply, its result as an "Observation:". The
mode that works is remembered per endpoint and model, beside the rest of what Thalamus learnt
of a server (`forget_model_limits` clears it).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as ToolTimeout
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db import DatabaseError, connection
from psycopg.errors import QueryCanceled
from pydantic import BaseModel, Field, ValidationError

from apps.cognition.tools import TOOLS, Evidence, Tool, ToolContext, ToolError
from apps.core.llm import gateway
from apps.core.llm.clients import ToolsRefused
from apps.core.llm.fitting import PromptBuilder, Room, fit, message_piece
from apps.core.llm.limits import CHAT, Endpoint, role_endpoint
from apps.core.llm.outcomes import LLMError, TimedOut, Unreachable
from apps.core.llm.structured import MODE_SECONDS, first_json_object, parse_reply
from apps.core.models import RuntimeConfig

logger = logging.getLogger(__name__)

TOOLS_MODE, REACT_MODE = "tools", "react"
# A round's reply is a few tool calls or one JSON action, never the answer.
LOOP_MAX_TOKENS = 256
ERROR_CHARS = 300

TOOLS_PROMPT = (
    "Before the user's last message is answered, gather the evidence the answer needs. Call "
    "the tools that can help, several at once if useful. When you have enough, or no tool can "
    "help, reply with the single word: done."
)
REACT_PROMPT = (
    "Before the user's last message is answered, gather the evidence the answer needs with "
    "these tools:\n{tools}\n\n"
    "Reply with one JSON object only, no other text:\n"
    '{{"thought": "<why>", "action": "<a tool name, or final>", "input": {{<its arguments>}}}}\n'
    'The tool\'s result comes back as "Observation: ...". When you have enough, or no tool '
    'can help, reply with the action "final".'
)

# Tool calls run on their own threads so that a slow one can be left behind, and stopped: its
# queries end at its deadline (`_run_and_close`); each closes its database connection when done.
_TOOL_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="thalamus-tool")


class ToolDeadlinePassed(Exception):
    """A tool ran past its time: its caller stopped waiting, its queries stop."""


@dataclass
class ToolLoopResult:
    evidence: list[Evidence] = field(default_factory=list)
    # Per call: round, tool, arguments, outcome ("ok", "invalid", "not allowed", "timeout",
    # "error"), error, ms.
    calls: list[dict] = field(default_factory=list)
    rounds: int = 0
    mode: str = TOOLS_MODE
    # Why the loop ended: "answered", "round cap", "no rounds", "llm error: <sentence>".
    stopped: str = "answered"


class ReactStep(BaseModel):
    """One reply of a model without tool calling: what it thinks, then one action."""

    thought: str = ""
    action: str = Field(min_length=1)
    input: dict[str, Any] | str = Field(default_factory=dict)


@dataclass(frozen=True)
class _Wish:
    """A tool call as the model wrote it, before anything is checked."""

    name: str
    arguments: Any
    call_id: str | None = None


class _UnreadableReply(Exception):
    pass


def _mode_key(endpoint: Endpoint) -> str:
    return f"llm:tool-mode:{endpoint.key}"


def tool_mode(*, endpoint: Endpoint) -> str:
    """How `endpoint` is offered tools: OpenAI tool calling until it refused them."""
    return REACT_MODE if cache.get(_mode_key(endpoint)) == REACT_MODE else TOOLS_MODE


def gather_evidence(
    *,
    context: ToolContext,
    question: str,
    history: list[dict],
    allowed: Sequence[str],
    config: RuntimeConfig,
) -> ToolLoopResult:
    """Let the chat model call the `allowed` tools for at most `config.tool_rounds` rounds.

    `history` is the conversation before `question` as chat messages; each round is fitted to
    the window of the model asked (the chat's, or a fallback). Raises only ValueError for a tool
    name that does not exist.
    """
    unknown = set(allowed) - set(TOOLS)
    if unknown:
        raise ValueError(f"unknown tools: {sorted(unknown)}")
    endpoint = role_endpoint(CHAT, config)
    result = ToolLoopResult(mode=tool_mode(endpoint=endpoint))
    offered = [TOOLS[name] for name in dict.fromkeys(allowed)]
    if config.tool_rounds == 0 or not offered:
        result.stopped = "no rounds"
        return result

    conversation = [*history, {"role": "user", "content": question}]
    messages = _start(result.mode, offered, conversation)
    seen: set = set()

    def call(wish: _Wish) -> str:
        return _call(
            wish, context=context, offered=offered, config=config, result=result, seen=seen
        )

    while result.rounds < config.tool_rounds:
        tools = [tool.as_openai() for tool in offered] if result.mode == TOOLS_MODE else None
        try:
            reply = gateway.complete(
                role=CHAT,
                prompt=_fitted(messages, question_at=len(conversation)),
                max_tokens=LOOP_MAX_TOKENS,
                temperature=0.2,
                tools=tools,
                foreground=True,
                config=config,
            )
        except ToolsRefused:
            if result.mode != TOOLS_MODE:
                raise
            logger.info("%s refuses tool calling; tools through text from now on", endpoint)
            result.mode = REACT_MODE
            cache.set(_mode_key(endpoint), REACT_MODE, MODE_SECONDS)
            messages = _start(result.mode, offered, conversation)
            continue
        except LLMError as exc:
            result.stopped = f"llm error: {_llm_error_sentence(exc, config)}"
            return result
        result.rounds += 1
        said = {"content": reply.content, "tool_calls": reply.tool_calls}
        if result.mode == TOOLS_MODE:
            went_on = _tools_round(said, messages, call)
        else:
            went_on = _react_round(said, messages, call, result)
        if not went_on:
            result.stopped = "answered"
            return result

    result.stopped = "round cap"
    return result


def _fitted(messages: list[dict], *, question_at: int) -> PromptBuilder:
    """The loop's messages fitted to the model's room: the system prompt and the question (at
    `question_at`) stay, a long question losing its middle; older history goes first; each
    observation may lose its middle; the calls themselves stay, as their results answer them."""

    def build(room: Room) -> list[dict]:
        pieces = []
        for index, message in enumerate(messages):
            text = message.get("content") or ""
            calls = message.get("tool_calls")
            if index == 0:
                pieces.append(message_piece(text))
            elif index < question_at:
                pieces.append(message_piece(text, keep=index))
            elif calls:
                piece = message_piece(text)
                piece.extra += room.counter.text(json.dumps(calls))
                pieces.append(piece)
            else:
                pieces.append(message_piece(text, shorten=True))
        texts = fit(pieces, budget=room.budget, counter=room.counter)
        return [
            {**message, "content": text}
            for message, text in zip(messages, texts, strict=True)
            if text is not None
        ]

    return build


def _tools_round(reply: dict, messages: list[dict], call: Callable[[_Wish], str]) -> bool:
    """Run the tools a reply calls, their observations as tool messages; False if it called none."""
    wishes = [
        _Wish(
            name=str((tool_call.get("function") or {}).get("name") or ""),
            arguments=(tool_call.get("function") or {}).get("arguments"),
            call_id=tool_call.get("id"),
        )
        for tool_call in reply.get("tool_calls") or []
        if isinstance(tool_call, dict)
    ]
    if not wishes:
        return False
    messages.append(
        {
            "role": "assistant",
            "content": reply.get("content") or "",
            "tool_calls": reply["tool_calls"],
        }
    )
    for wish in wishes:
        messages.append({"role": "tool", "tool_call_id": wish.call_id, "content": call(wish)})
    return True


def _react_round(
    reply: dict, messages: list[dict], call: Callable[[_Wish], str], result: ToolLoopResult
) -> bool:
    """Run the action a ReAct reply names, its observation as a user message; False if final."""
    action = first_json_object(reply.get("content") or "")
    if action is None:
        # Prose instead of an action: the model has answered in its own way.
        return False
    try:
        step = parse_reply(ReactStep, action)
    except ValidationError as exc:
        observation = f"that reply is not an action: {_validation_sentence(exc)}"
        _record(result, tool="", arguments=action, outcome="invalid", error=observation, ms=0)
    else:
        if step.action.strip().lower() == "final":
            return False
        observation = call(_Wish(step.action, step.input))
    messages.append({"role": "assistant", "content": action})
    messages.append({"role": "user", "content": f"Observation: {observation}"})
    return True


def _start(mode: str, offered: list[Tool], conversation: list[dict]) -> list[dict]:
    if mode == TOOLS_MODE:
        return [{"role": "system", "content": TOOLS_PROMPT}, *conversation]
    listing = "\n".join(
        f"- {tool.name}: {tool.description} Input (JSON schema): "
        f"{json.dumps(tool.args.model_json_schema().get('properties', {}))}"
        for tool in offered
    )
    return [{"role": "system", "content": REACT_PROMPT.format(tools=listing)}, *conversation]


def _call(
    wish: _Wish,
    *,
    context: ToolContext,
    offered: list[Tool],
    config: RuntimeConfig,
    result: ToolLoopResult,
    seen: set,
) -> str:
    """Check and run one call; its evidence joins the result, and the observation is returned."""
    started = time.perf_counter()
    arguments = wish.arguments

    def done(outcome: str, error: str = "") -> str:
        ms = round((time.perf_counter() - started) * 1000, 2)
        _record(result, tool=wish.name, arguments=arguments, outcome=outcome, error=error, ms=ms)
        return error

    tool = next((tool for tool in offered if tool.name == wish.name), None)
    if tool is None:
        names = ", ".join(tool.name for tool in offered)
        return done("not allowed", f"tool {wish.name} is not available here (only: {names})")
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            return done("invalid", f"the arguments of {tool.name} are not valid JSON: {exc}")
    try:
        args = tool.args.model_validate(arguments)
    except ValidationError as exc:
        return done("invalid", f"invalid arguments for {tool.name}: {_validation_sentence(exc)}")

    try:
        deadline = time.monotonic() + config.tool_timeout_seconds
        future = _TOOL_POOL.submit(_run_and_close, tool, context, args, deadline=deadline)
        try:
            found = future.result(timeout=config.tool_timeout_seconds)
        except ToolTimeout:
            future.cancel()
            raise ToolDeadlinePassed from None
    except ToolDeadlinePassed:
        return done(
            "timeout", f"{tool.name} did not answer within {config.tool_timeout_seconds:g} s"
        )
    except ToolError as exc:
        return done("error", f"{tool.name} failed: {exc}"[:ERROR_CHARS])
    except Exception as exc:  # noqa: BLE001 — a broken tool is an observation, not a broken turn.
        logger.exception("tool %s failed", tool.name)
        return done("error", f"{tool.name} failed: {type(exc).__name__}: {exc}"[:ERROR_CHARS])

    for evidence in found:
        key = evidence.ref or (evidence.kind, evidence.text)
        if key not in seen:
            seen.add(key)
            result.evidence.append(evidence)
    done("ok")
    return _observation(found)


def _run_and_close(
    tool: Tool, context: ToolContext, args: BaseModel, *, deadline: float
) -> list[Evidence]:
    """Run the tool until `deadline` (time.monotonic()) and no further: a thread cannot be
    killed, so the tool's work is stopped where it happens, in the database. Every statement
    runs with PostgreSQL's statement_timeout set to the time left, so a slow one is cancelled
    by the server at the deadline, and none starts after it. (The embedder's call has its own
    timeout within the tool's; the calculator bounds its own work.) No transaction is opened
    around the tool: a search tool embeds its query over HTTP between its statements."""
    try:
        with connection.execute_wrapper(_until(deadline)):
            return tool.run(context, args)
    except DatabaseError as exc:
        # The server's cancellation may come back a moment before the caller stops waiting,
        # and even before the deadline itself: the time left is sent in whole milliseconds,
        # counted before the statement starts. A cancelled statement here is our time-out's.
        if time.monotonic() >= deadline or isinstance(exc.__cause__, QueryCanceled):
            raise ToolDeadlinePassed from exc
        raise
    finally:
        connection.close()


def _until(deadline: float):
    def execute(run, sql, params, many, context):
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise ToolDeadlinePassed
        # For the session: the thread's connection is closed when the tool is done
        # (_run_and_close), so no other work inherits the timeout.
        context["cursor"].cursor.execute(
            "SELECT set_config('statement_timeout', %s, false)", [f"{left_ms}ms"]
        )
        return run(sql, params, many, context)

    return execute


def _record(
    result: ToolLoopResult, *, tool: str, arguments: Any, outcome: str, error: str, ms: float
) -> None:
    if isinstance(arguments, str):
        arguments = arguments[:ERROR_CHARS]
    result.calls.append(
        {
            "round": result.rounds,
            "tool": tool,
            "arguments": arguments,
            "outcome": outcome,
            "error": error,
            "ms": ms,
        }
    )


def _observation(found: list[Evidence]) -> str:
    if not found:
        return "nothing found"
    lines = []
    for evidence in found:
        ref = f"[{evidence.ref}] " if evidence.ref else ""
        when = f" ({evidence.at:%Y-%m-%d})" if evidence.kind in ("memory", "episode") else ""
        lines.append(f"- {ref}{evidence.text}{when}")
    return "\n".join(lines)


def _validation_sentence(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, error['loc'])) or 'arguments'}: {error['msg']}"
        for error in exc.errors()[:5]
    )


def _llm_error_sentence(exc: LLMError, config: RuntimeConfig) -> str:
    if isinstance(exc, TimedOut):
        return f"the chat model did not answer within {config.router_timeout_seconds} s"
    if exc.status_code is None and isinstance(exc, Unreachable):
        return "the chat model's server could not be reached"
    if exc.status_code is not None:
        said = exc.reason.removeprefix(f"HTTP {exc.status_code}").removeprefix(": ")
        return f"HTTP {exc.status_code} from the chat model: {said}"[:ERROR_CHARS]
    return str(exc)[:ERROR_CHARS]
