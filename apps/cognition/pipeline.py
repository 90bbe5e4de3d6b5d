"""The turn, top to bottom. Its shape:

    router → context builder (recall ⇄ tools) → answer → world modifier, reflection (background)

1. route    — rules, with no LLM call: answer directly, gather context with tools first, or
              change the user's world state after the answer.
2. recall   — what memory holds for the message (started as the message arrives, beside the
              save and the router).
3. tools    — only when routed to gather: a bounded loop of tool calls (memory, episodes, graph,
              chat history, time, calculator) whose results become evidence in the prompt.
4. world    — only when routed to change it: marked for the world modifier, which runs after the
              answer is saved (`world.world_change_after_reply`): no turn waits for an LLM call
              other than its own answer. The change shows from the next turn on.
5. assemble — the request for the LLM, fitted to the model's window (turn_request.build_turn).
6. answer   — streamed (answer.answer_reply), which saves the reply however it ends.
7. reflect  — queued once the reply is saved; the worker learns from the exchange.

Each step is a plain function over the part of the typed turn state (`turn_state`) it needs,
recorded as a span (name, start, duration, outcome, error) in the reply's trace. A step that
fails leaves its error in its span and on the page's status line, and the turn goes on without
it: only the answer itself can fail a turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future
from typing import NamedTuple

from channels.db import database_sync_to_async
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.chat.turn_status import recall_counts, recall_words
from apps.cognition.answer import answer_reply
from apps.cognition.context import BoundedPool, OwnSearch, read_on_pool
from apps.cognition.route import (
    ANSWER,
    GATHER,
    PERSONAL_DIRECT,
    RULE,
    WORLD,
    RouteDecision,
    route_by_rule,
)
from apps.cognition.turn_memory import MemoryForTurn, memory_for_turn, memory_marked
from apps.cognition.turn_request import PreparedTurn, build_turn, turn_history
from apps.cognition.turn_state import CallOptions, Span, Turn, TurnInput
from apps.cognition.world import WORLD_QUEUED, world_after_answer
from apps.core.llm.chat_models import picked_chat_model
from apps.core.llm.servers import Endpoint
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

# The tools the context builder may call; the world modifier calls none.
CONTEXT_TOOLS = (
    "memory_query",
    "episode_search",
    "graph_query",
    "chat_history_tail",
    "current_time",
    "calculator",
)
# A turn with memory off (the user's setting, a temporary chat) only answers.
MEMORY_OFF = RouteDecision(ANSWER, "memory is off for this chat", RULE)
# The world step's word on a turn whose change waits for the answer to be saved.
AFTER_THE_ANSWER = "after the answer"
# Subsystems of the status line, in the order it shows them.
SUBSYSTEMS = ("router", "retrieval", "tools", "world", "llm", "reflection")

# A status update: subsystem, state ("running", "ok", "skipped", "error"), a short text.
StatusSink = Callable[[str, str, str], Awaitable[None] | None]


# ----------------------------------------------------------------------------------- steps


def route(*, text: str, history: list[Message]) -> RouteDecision:
    """Step 1: the rule, else the answer with what memory holds."""
    return route_by_rule(text, has_history=len(history) > 1) or PERSONAL_DIRECT


def recall(*, inp: TurnInput, own: OwnSearch | None = None) -> MemoryForTurn:
    """Step 2: what memory holds for the message (never raises on an embedding failure)."""
    return memory_for_turn(
        user=inp.user,
        conversation=inp.conversation,
        text=inp.text,
        config=inp.config,
        own=own,
        recall=inp.options.remember,
        prefs=inp.prefs,
    )


def use_tools(*, inp: TurnInput, history: list[Message]):
    """Step 3: the bounded tool loop; its errors are observations, never exceptions."""
    from apps.cognition.toolloop import gather_evidence
    from apps.cognition.tools import ToolContext

    question = history[-1] if history else None
    return gather_evidence(
        context=ToolContext(
            user_id=inp.user.pk,
            conversation_id=inp.conversation.pk,
            before_message_id=question.pk if question is not None else None,
            time_zone=inp.time_zone,
            config=inp.config,
        ),
        question=inp.text,
        history=_plain(history[:-1]),
        allowed=CONTEXT_TOOLS,
        config=inp.config,
    )


def assemble(*, turn: Turn, continue_from: str = "") -> PreparedTurn:
    """Step 5: the request for the LLM, with the evidence and the world state in it."""
    evidence = list(getattr(turn.tools, "evidence", None) or [])
    options = turn.input.options
    prepared = build_turn(
        reply=turn.reply,
        history=turn.history,
        memory=turn.memory,
        continue_from=continue_from,
        evidence=evidence,
        client_system=options.system,
    )
    model = options.model or turn.picked_model
    if model:
        # The client's or the conversation's choice on the chat's server: the gateway fits the
        # prompt to its window.
        prepared.endpoint = Endpoint(prepared.base_url, model)
        prepared.model = model
    if options.temperature is not None:
        prepared.temperature = options.temperature
    if options.max_tokens is not None:
        prepared.max_tokens = options.max_tokens
    prepared.top_p, prepared.stop, prepared.seed = options.top_p, options.stop, options.seed
    prepared.remember = options.remember
    prepared.trace.update(_trace_of(turn))
    prepared.spans = turn.spans
    return prepared


# ------------------------------------------------------------------------------ the order


def start_turn(
    *,
    user,
    conversation,
    text: str,
    config: RuntimeConfig | None = None,
    own: OwnSearch | None = None,
    status: StatusSink | None = None,
    options: CallOptions | None = None,
    prefs=None,
    conversation_read: bool = False,
) -> TurnRun:
    """Start a turn as its message arrives: the recall begins at once, beside the message's
    save; `TurnRun.prepare` routes and waits for it once the reply exists. Without `config`
    the recall reads the configuration afresh, on its thread; without `prefs`, the user's
    settings. `conversation_read`: the caller read `conversation` from the database for this
    turn (None: it starts a new one), so its pick is not read again."""
    turn = _new_turn(user, conversation, text, config, options, prefs, conversation_read)
    return TurnRun(turn, own=own, status=status)


class StartedRecall(NamedTuple):
    """A turn whose recall a request's thread started on a pool thread (`turn_begin`)."""

    turn: Turn
    own: OwnSearch | None
    recalled: Future | None
    span: Span


def turn_begin(
    *,
    user,
    conversation,
    text: str,
    config: RuntimeConfig,
    own: OwnSearch | None,
    options: CallOptions,
    prefs,
) -> StartedRecall:
    """`start_turn` from a request's own thread (the API's accept), which saves the message
    next: the recall starts on a pool thread the moment the conversation is known, with no hop
    back to the event loop and out again first. `TurnRun.begun` goes on from it. When that pool
    is full, `recalled` is None and the TurnRun starts the recall itself."""
    turn = _new_turn(user, conversation, text, config, options, prefs, True)
    span = turn.spans.open("recall")
    recalled = read_on_pool(_RECALL_POOL, recall, inp=turn.input, own=own)
    return StartedRecall(turn, own, recalled, span)


# Recalls started by a request's thread. A recall waits on the search pools, never they on it,
# so no pool can deadlock. Each thread keeps a database connection: when all are busy, the turn's
# run starts its recall on the event loop's own pool instead of queueing here.
_RECALL_POOL = BoundedPool(4, queue=0, thread_name_prefix="thalamus-turn")


def _new_turn(user, conversation, text, config, options, prefs, conversation_read) -> Turn:
    return Turn(
        TurnInput(
            user=user,
            conversation=conversation,
            text=text,
            config=config,
            time_zone=timezone.get_current_timezone_name(),
            options=options or CallOptions(),
            prefs=prefs,
            conversation_read=conversation_read,
        )
    )


class TurnRun:
    """One turn in an event loop: the steps in order, the slow ones on threads."""

    def __init__(
        self,
        turn: Turn,
        *,
        own: OwnSearch | None,
        status: StatusSink | None,
        started: StartedRecall | None = None,
    ):
        self.turn = turn
        self.status = status
        # The status line: subsystem -> (state, text), as the steps report.
        self.states: dict[str, tuple[str, str]] = {}
        self._notify("session", "running", "turn started")
        self._recall_span = started.span if started else turn.spans.open("recall")
        if started is not None and started.recalled is not None:
            self.recalled = asyncio.wrap_future(started.recalled)
        else:
            self.recalled = asyncio.ensure_future(
                database_sync_to_async(recall, thread_sensitive=False)(inp=turn.input, own=own)
            )
        # Read as the message arrives, not from the page's copy: another page may have picked.
        # (The API starts a turn before its conversation is known: then at `prepare`.)
        conversation = turn.input.conversation
        # Read moments ago by the caller: no thread hop nor statement for it again.
        self.picked = _known_pick(conversation) if turn.input.conversation_read else None
        if self.picked is None and conversation is not None:
            self.picked = self._read_pick(conversation.pk)

    @classmethod
    def begun(cls, started: StartedRecall) -> TurnRun:
        """The run of a turn `turn_begin` started, in the event loop."""
        return cls(started.turn, own=started.own, status=None, started=started)

    def cancel(self) -> None:
        self.recalled.cancel()
        if self.picked is not None:
            self.picked.cancel()

    @staticmethod
    def _read_pick(conversation_id: int) -> asyncio.Future:
        return asyncio.ensure_future(
            database_sync_to_async(conversation_picked_model, thread_sensitive=False)(
                conversation_id=conversation_id
            )
        )

    def _notify(self, subsystem: str, state: str, text: str = "") -> None:
        self.states[subsystem] = (state, text)
        if self.status is not None:
            result = self.status(subsystem, state, text)
            if asyncio.iscoroutine(result):
                asyncio.ensure_future(result)

    async def prepare(self, *, reply: Message, history: list[Message]) -> PreparedTurn:
        turn = self.turn
        turn.reply, turn.history = reply, history
        spans = turn.spans
        with spans.span("route") as span:
            decided = route(text=turn.input.text, history=history)
            if not turn.input.options.remember:
                decided = RouteDecision(ANSWER, "memory is off for this call", RULE)
            turn.route = decided
            span.detail = f"{decided.route} ({decided.by})"
        self._notify("router", "ok", decided.route)
        try:
            turn.memory = await self.recalled
        except BaseException as exc:
            spans.close(self._recall_span, error=f"{type(exc).__name__}: {exc}")
            raise
        turn.input.config = turn.memory.config
        memory_marked(turn.memory, conversation_id=reply.conversation_id)
        _honour_settings(turn)
        embedding_error = turn.memory.context.trace.get("embedding_error", "")
        spans.close(self._recall_span, error=embedding_error)
        self._notify(
            "retrieval",
            "error" if embedding_error else "ok",
            "full-text only: the embedding failed" if embedding_error else _recalled(turn.memory),
        )
        await self._tools_and_world()
        if self.picked is None and turn.input.conversation_read:
            self.picked = _known_pick(reply.conversation)  # new: saved without a pick
        turn.picked_model = await (self.picked or self._read_pick(reply.conversation_id))
        with spans.span("assemble"):
            turn.prepared = assemble(turn=turn)
        self._notify("llm", "running", "asking the model")
        return turn.prepared

    async def _tools_and_world(self) -> None:
        turn = self.turn
        spans = turn.spans
        if turn.route.route == GATHER and turn.input.config.tool_rounds:
            self._notify("tools", "running", "looking things up")
            with spans.span("tools") as span:
                turn.tools = await database_sync_to_async(use_tools, thread_sensitive=False)(
                    inp=turn.input, history=turn.history
                )
                span.detail = _tools_detail(turn.tools)
                if turn.tools.stopped.startswith("llm error"):
                    span.outcome, span.error = "error", turn.tools.stopped
            failed = span.outcome == "error"
            self._notify("tools", "error" if failed else "ok", span.error or span.detail)
        else:
            spans.skip("tools", "not needed" if turn.route.route != GATHER else "tools are off")
        if world_after_answer(route=turn.route, config=turn.input.config):
            turn.world_after_answer = True
            spans.skip("world", AFTER_THE_ANSWER)
            self._notify("world", "ok", AFTER_THE_ANSWER)
        else:
            spans.skip("world", "no change asked")


def prepare_saved_reply(*, reply_id: int) -> PreparedTurn:
    """The whole preparation in one thread, for a saved reply (Retry, Continue, the API); a
    reply with text is continued from it."""
    reply = Message.objects.select_related("conversation__owner").get(pk=reply_id)
    conversation = reply.conversation
    config = runtime_config()
    history = turn_history(reply=reply, config=config)
    text = history[-1].content if history else ""
    turn = Turn(
        TurnInput(
            user=conversation.owner,
            conversation=conversation,
            text=text,
            config=config,
            time_zone=timezone.get_current_timezone_name(),
        ),
        reply=reply,
        history=history,
    )
    spans = turn.spans
    with spans.span("route") as span:
        turn.route = route(text=text, history=history)
        span.detail = f"{turn.route.route} ({turn.route.by})"
    with spans.span("recall"):
        turn.memory = recall(inp=turn.input)
    _honour_settings(turn)
    if turn.route.route == GATHER and config.tool_rounds:
        with spans.span("tools") as span:
            turn.tools = use_tools(inp=turn.input, history=history)
            span.detail = _tools_detail(turn.tools)
    else:
        spans.skip("tools", "not needed")
    # A Retry or Continue does not change the world state a second time.
    spans.skip("world", "not on a retry")
    turn.picked_model = picked_chat_model(conversation.chat_model, config)
    with spans.span("assemble"):
        turn.prepared = assemble(turn=turn, continue_from=reply.content)
    return turn.prepared


def answer_saved_reply(*, reply_id: int, **callbacks) -> AsyncIterator[str]:
    """Steps 1-7 for a saved reply (Retry, Continue, the API, the page without JavaScript):
    prepared on one thread, then answered as `answer_reply` does, with its callbacks."""
    # Not thread-sensitive, so concurrent turns do not queue behind each other on one thread.
    prepared = database_sync_to_async(prepare_saved_reply, thread_sensitive=False)(
        reply_id=reply_id
    )
    return answer_reply(reply_id=reply_id, turn=prepared, **callbacks)


# --------------------------------------------------------------------------------- helpers


def conversation_picked_model(*, conversation_id: int) -> str | None:
    """The model the conversation's picker chose, while it is still offered; None: the
    configured chat model answers."""
    picked = Conversation.objects.filter(pk=conversation_id).values_list("chat_model", flat=True)
    return picked_chat_model(picked.first() or "")


def _known_pick(conversation) -> asyncio.Future | None:
    """The pick of a conversation just read, as `_read_pick` would give it; None when it has
    one, which is checked against the models offered on a thread."""
    if conversation is None or conversation.chat_model:
        return None
    known = asyncio.get_running_loop().create_future()
    known.set_result(None)  # no pick: the configured chat model answers
    return known


def _honour_settings(turn: Turn) -> None:
    """What the user's settings, read by the recall, change in the rest of the turn: the tools
    tell the time in the user's time zone; with memory off, or in a temporary chat, the turn
    neither looks things up in memory nor changes the world state."""
    turn.input.time_zone = turn.memory.time_zone or turn.input.time_zone
    # (A personal message would be shown to the world modifier with the router's model on.)
    if not turn.memory.remember and (
        turn.route.route in (GATHER, WORLD) or turn.route == PERSONAL_DIRECT
    ):
        turn.route = MEMORY_OFF


def _plain(messages: list[Message]) -> list[dict]:
    return [{"role": message.role, "content": message.content} for message in messages]


def _recalled(memory: MemoryForTurn) -> str:
    """What the status line will say once the reply is saved, counted from the same trace."""
    return recall_words(*recall_counts(memory.context.trace))


def _tools_detail(result) -> str:
    calls = len(result.calls)
    return f"{calls} call{'s' if calls != 1 else ''}, {len(result.evidence)} found ({result.mode})"


def _trace_of(turn: Turn) -> dict:
    """What the controller adds to the reply's trace: the route, tool calls, world changes."""
    trace: dict = {"route": turn.route.as_trace()}
    if turn.tools is not None:
        tools = turn.tools
        trace["tools"] = {
            "mode": tools.mode,
            "rounds": tools.rounds,
            "stopped": tools.stopped,
            "calls": tools.calls,
            # Ids for what the user's memory holds (the panel reads their current texts), the
            # text itself only for what no row holds (the time, a sum).
            "evidence": [
                {"tool": item.tool, "kind": item.kind, "ref": item.ref}
                if item.ref
                else {"tool": item.tool, "kind": item.kind, "text": item.text[:300]}
                for item in tools.evidence
            ],
        }
    if turn.world_after_answer:
        # Read once the reply is saved: the world modifier is queued then (`world`).
        trace[WORLD_QUEUED] = True
    return trace
