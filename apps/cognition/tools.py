"""The tools the context builder may call, and the one shape of what they find (Evidence).

Each tool reads through the existing selectors and sees only what `ToolContext.user_id` may see:
the user's own rows (and the global memories and triples every user shares), the user's own
conversation. A tool that cannot answer raises `ToolError`; its message is what the model sees.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.utils import timezone
from pydantic import BaseModel, Field

from apps.chat.models import Message
from apps.core.models import RuntimeConfig
from apps.memory.embedding import EmbeddingError, get_embedder
from apps.memory.episode_selectors import episode_search
from apps.memory.query_text import STOPWORDS
from apps.memory.search_selectors import EMBED_TIMEOUT_SECONDS, Weights, memory_search
from apps.memory.selectors import knowledge_triples_for

# What one piece of evidence may say, so that a few rounds of results fit a small window.
EVIDENCE_CHARS = 500
HISTORY_MAX = 20
GRAPH_SCAN = 200
# The calculator refuses results longer than this many bits: 9**9**9 would take minutes.
CALCULATOR_MAX_BITS = 4096
CALCULATOR_MAX_CHARS = 200


class Evidence(BaseModel):
    """One thing a tool found, in the one schema every tool's results share."""

    tool: str
    kind: Literal["memory", "episode", "triple", "message", "time", "calculation", "note"]
    # "memory:12", "episode:3", "triple:7", "message:55": ids of the user's own rows only.
    ref: str | None = None
    text: str
    score: float | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class ToolContext:
    user_id: int
    conversation_id: int
    # chat_history_tail reads the messages before this one (the current question).
    before_message_id: int | None
    time_zone: str  # an IANA name, e.g. "Europe/Rome"
    config: RuntimeConfig


class ToolError(Exception):
    """A tool could not answer; the message is the observation the model sees."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[BaseModel]
    run: Callable[[ToolContext, BaseModel], list[Evidence]]

    def as_openai(self) -> dict:
        """The tool as an OpenAI function; its parameters are the JSON schema of `args`."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.args.model_json_schema(),
            },
        }


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


def _query_vector(text: str, config: RuntimeConfig) -> list[float] | None:
    """The query's embedding; None when the embedder is down (the search is full text then)."""
    timeout = min(EMBED_TIMEOUT_SECONDS, config.tool_timeout_seconds)
    try:
        return get_embedder(timeout=timeout, config=config).embed([text])[0]
    except EmbeddingError:
        return None


# ------------------------------------------------------------------------------- memory_query


class MemoryQueryArgs(BaseModel):
    query: str = Field(min_length=1, max_length=500, description="What to look for.")
    limit: int = Field(default=5, ge=1, le=10, description="At most this many memories.")


def memory_query(context: ToolContext, args: MemoryQueryArgs) -> list[Evidence]:
    hits = memory_search(
        user_id=context.user_id,
        text=args.query,
        vector=_query_vector(args.query, context.config),
        limit=args.limit,
        weights=Weights.from_config(context.config),
    )
    return [
        Evidence(
            tool="memory_query",
            kind="memory",
            ref=None if hit.is_global else f"memory:{hit.id}",
            text=_clip(hit.description),
            score=round(hit.score, 4),
            at=hit.created_at,
        )
        for hit in hits
    ]


# ----------------------------------------------------------------------------- episode_search


class EpisodeSearchArgs(BaseModel):
    query: str = Field(min_length=1, max_length=500, description="What happened, in words.")
    limit: int = Field(default=3, ge=1, le=5, description="At most this many episodes.")


def episode_search_tool(context: ToolContext, args: EpisodeSearchArgs) -> list[Evidence]:
    hits = episode_search(
        user_id=context.user_id,
        text=args.query,
        vector=_query_vector(args.query, context.config),
        limit=args.limit,
        weights=Weights.from_config(context.config),
    )
    return [
        Evidence(
            tool="episode_search",
            kind="episode",
            ref=f"episode:{hit.id}",
            text=_clip(f"{hit.summary} Lesson: {hit.lesson}" if hit.lesson else hit.summary),
            score=round(hit.score, 4),
            at=hit.ended_at,
        )
        for hit in hits
    ]


# -------------------------------------------------------------------------------- graph_query


class GraphQueryArgs(BaseModel):
    query: str = Field(
        default="",
        max_length=200,
        description="Words to find in a fact's subject, relation or value; empty lists all.",
    )
    limit: int = Field(default=10, ge=1, le=20, description="At most this many facts.")


def graph_query(context: ToolContext, args: GraphQueryArgs) -> list[Evidence]:
    words = [
        word
        for word in args.query.lower().replace("_", " ").split()
        if len(word) > 1 and word not in STOPWORDS
    ]
    found = []
    for triple in knowledge_triples_for(user_id=context.user_id, limit=GRAPH_SCAN):
        relation = triple.predicate.name.replace("_", " ")
        text = f"{triple.subject} — {relation}: {triple.object}"
        matches = sum(word in text.lower() for word in words)
        if matches or not words:
            found.append((matches, triple, text))
    # The facts that share the most words with the query first; sorted() keeps the renderer's
    # order among equals.
    found = sorted(found, key=lambda item: item[0], reverse=True)[: args.limit]
    return [
        Evidence(
            tool="graph_query",
            kind="triple",
            ref=None if triple.owner_id is None else f"triple:{triple.id}",
            text=_clip(text),
            score=round(triple.confidence, 4),
            at=triple.valid_from,
        )
        for _, triple, text in found
    ]


# -------------------------------------------------------------------------- chat_history_tail


class ChatHistoryArgs(BaseModel):
    limit: int = Field(
        default=10, ge=1, le=HISTORY_MAX, description="How many of the latest messages."
    )


def chat_history_tail(context: ToolContext, args: ChatHistoryArgs) -> list[Evidence]:
    messages = (
        Message.objects.filter(
            conversation_id=context.conversation_id,
            conversation__owner_id=context.user_id,
            active=True,
        )
        .exclude(status=Message.Status.FAILED)
        .exclude(content="")
    )
    if context.before_message_id is not None:
        messages = messages.filter(pk__lt=context.before_message_id)
    latest = list(
        messages.order_by("-pk").only("id", "role", "content", "created_at")[: args.limit]
    )
    return [
        Evidence(
            tool="chat_history_tail",
            kind="message",
            ref=f"message:{message.pk}",
            text=_clip(f"{message.role}: {message.content}"),
            at=message.created_at,
        )
        for message in reversed(latest)
    ]


# ------------------------------------------------------------------------------- current_time


class CurrentTimeArgs(BaseModel):
    pass


def current_time(context: ToolContext, args: CurrentTimeArgs) -> list[Evidence]:
    try:
        zone = ZoneInfo(context.time_zone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolError(f"unknown time zone {context.time_zone!r}") from exc
    now = timezone.now().astimezone(zone)
    offset = now.strftime("%z")
    return [
        Evidence(
            tool="current_time",
            kind="time",
            text=(
                f"{now:%A %d %B %Y, %H:%M} in {context.time_zone} (UTC{offset[:3]}:{offset[3:]})"
            ),
            at=now,
        )
    ]


# --------------------------------------------------------------------------------- calculator


class CalculatorArgs(BaseModel):
    expression: str = Field(
        min_length=1,
        max_length=CALCULATOR_MAX_CHARS,
        description="Arithmetic: numbers, + - * / // % **, parentheses. No names or functions.",
    )


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}


def calculate(expression: str) -> int | float:
    """The value of an arithmetic expression, read from its syntax tree: nothing is executed."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {exc.msg}") from exc
    except ValueError as exc:  # a null byte
        raise ToolError(f"not an arithmetic expression: {exc}") from exc
    return _evaluate(tree.body)


def _evaluate(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ToolError(f"only numbers are allowed, not {node.value!r}")
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError as exc:
            raise ToolError("division by zero") from exc
        except OverflowError as exc:
            raise ToolError("the result is too large") from exc
        if isinstance(value, complex):
            raise ToolError("the result is not a real number")
        if isinstance(value, int) and value.bit_length() > CALCULATOR_MAX_BITS:
            raise ToolError("the result is too large")
        if isinstance(value, float) and not math.isfinite(value):
            raise ToolError("the result is too large")
        return value
    if isinstance(node, ast.Name):
        raise ToolError(f"names are not allowed ({node.id})")
    if isinstance(node, ast.Call):
        raise ToolError("function calls are not allowed")
    what = type(node.op if isinstance(node, ast.BinOp | ast.UnaryOp) else node).__name__
    raise ToolError(f"{what} is not allowed in arithmetic")


def _check_power(base: int | float, exponent: int | float) -> None:
    """Refuse a power whose result would be too large before computing it."""
    if abs(base) <= 1:
        return
    if exponent * math.log2(abs(base)) > CALCULATOR_MAX_BITS:
        raise ToolError("the result is too large")


def _number_text(value: int | float) -> str:
    if isinstance(value, float):
        return f"{value:.12g}"
    return str(value)


def calculator(context: ToolContext, args: CalculatorArgs) -> list[Evidence]:
    value = calculate(args.expression)
    return [
        Evidence(
            tool="calculator",
            kind="calculation",
            text=f"{args.expression.strip()} = {_number_text(value)}",
        )
    ]


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "memory_query",
            "Search what you remember about the user (facts, preferences, rules).",
            MemoryQueryArgs,
            memory_query,
        ),
        Tool(
            "episode_search",
            "Search past conversations with the user: what happened and what was learnt.",
            EpisodeSearchArgs,
            episode_search_tool,
        ),
        Tool(
            "graph_query",
            "Look up known facts (subject, relation, value), e.g. the user's name or city.",
            GraphQueryArgs,
            graph_query,
        ),
        Tool(
            "chat_history_tail",
            "Read the latest messages of this conversation, oldest first.",
            ChatHistoryArgs,
            chat_history_tail,
        ),
        Tool(
            "current_time",
            "The current date and time in the user's time zone.",
            CurrentTimeArgs,
            current_time,
        ),
        Tool(
            "calculator", "Work out an arithmetic expression exactly.", CalculatorArgs, calculator
        ),
    )
}
