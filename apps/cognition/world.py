"""The world modifier: the LLM proposes changes to the user's world state, the service judges.

It runs after the answer, in the background (`world_change_after_reply`, queued once the reply
is saved): a turn that changes the world state ("from now on, answer in bullet points") waits
for no LLM call but its answer's, and the change shows from the next turn on. It runs for a
turn the rules routed to it, and, with the router's model on, for a personal message no rule
places (the model then tells whether it changes anything: no operation at all).

The model only proposes operations (set / append / remove on topics, project, goals,
behaviour); `world_apply` validates each one and commits the valid ones in one transaction.
The proposal's schema is lenient on purpose: an operation on an unknown path must reach
`world_apply` and come back rejected with its reason, not fail the whole reply. It is bounded
(a few operations of short texts), so that a grammar makes the model finish.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from apps.chat import services as chat_services
from apps.chat.models import Message
from apps.chat.selectors import history_before
from apps.cognition.route import PERSONAL_DIRECT, WORLD, RouteDecision
from apps.core.llm.fitting import Piece, bodies, fixed_lines, template_prompt
from apps.core.llm.limits import ROUTER
from apps.core.llm.outcomes import LLMError, Preempted
from apps.core.llm.structured import complete_as
from apps.core.models import RuntimeConfig
from apps.memory.models import WorldState
from apps.memory.provenance import as_written, conversation_marker, datamark, marker_system
from apps.memory.schemas import WORLD_OPS, WORLD_PATHS
from apps.memory.selectors import world_state_for
from apps.memory.world_services import WorldChange, world_apply

logger = logging.getLogger(__name__)

# How many earlier messages the world modifier's model sees.
WORLD_HISTORY = 6
# The reply's trace: the turn asks for the world modifier after its answer (WORLD_QUEUED), and
# the modifier claims the reply and records what it changed (TRACE_KEY_WORLD).
WORLD_QUEUED = "world_queued"
TRACE_KEY_WORLD = "world"
# One message changes a few things, each said in a few words.
MAX_OPS = 3
MAX_VALUES = 3
VALUE_MAX_CHARS = 80
REASON_MAX_CHARS = 100


def _cut(limit: int):
    """A schema's bound held by a grammar; a server without one may send more, which is cut to
    the bound rather than failing the whole reply (`world_apply` judges what is left)."""
    return BeforeValidator(lambda value: value[:limit] if isinstance(value, str | list) else value)


Text = Annotated[str, _cut(VALUE_MAX_CHARS), Field(max_length=VALUE_MAX_CHARS)]


class ProposedWorldOp(BaseModel):
    """An operation as the model wrote it; `world_apply` decides whether it is one."""

    model_config = ConfigDict(extra="ignore")

    op: str = Field(json_schema_extra={"enum": list(WORLD_OPS)})
    path: str = Field(json_schema_extra={"enum": list(WORLD_PATHS)})
    value: Text | None = None
    values: Annotated[list[Text], _cut(MAX_VALUES), Field(max_length=MAX_VALUES)] | None = Field(
        default=None, description="Only for set on topics, goals or behaviour: the whole list."
    )


class WorldOps(BaseModel):
    """What the world modifier's model must answer."""

    model_config = ConfigDict(extra="ignore")

    ops: Annotated[list[ProposedWorldOp], _cut(MAX_OPS), Field(max_length=MAX_OPS)]
    reason: Annotated[str, _cut(REASON_MAX_CHARS), Field(max_length=REASON_MAX_CHARS)] = Field(
        default="", description="One short sentence."
    )


def state_lines(state: WorldState, marker: str = "") -> list[str]:
    """The record as the model sees it: every path, with its JSON value; with a `marker`, what
    the model proposed datamarked (apps.memory.provenance: data)."""
    by_model = {text.casefold() for text in state.proposed}

    def shown(value):
        if isinstance(value, list):
            return [shown(item) for item in value]
        if isinstance(value, str) and value.casefold() in by_model:
            return datamark(value, marker)
        return value

    return [
        f"{path}: {json.dumps(shown(value), ensure_ascii=False)}"
        for path, value in state.as_dict().items()
    ]


def _history_pieces(history: list[dict]) -> list[Piece]:
    """The last messages, oldest first; over budget the oldest go first."""
    lines = [
        f"{message['role']}: {message['content']}"
        for message in history[-WORLD_HISTORY:]
        if message.get("role") in ("user", "assistant") and isinstance(message.get("content"), str)
    ]
    return [Piece(line, keep=index) for index, line in enumerate(lines)]


def propose_world_ops(
    *, state: WorldState, question: str, history: list[dict], marker: str = ""
) -> WorldOps:
    """One short structured call to the router's model, in the background; with a `marker`,
    the history's data (its "content" already datamarked) and what the model proposed before
    are explained as data. Raises the gateway's outcomes."""
    lines = state_lines(state, marker)
    history_pieces = _history_pieces(history)
    prompt = template_prompt(
        "world",
        slots={
            "state": fixed_lines(lines),
            "history": history_pieces,
            "message": bodies([question]),
        },
        empty="(none)",
        system=marker_system(marker, [*lines, *(piece.text for piece in history_pieces)]),
    )
    return complete_as(WorldOps, role=ROUTER, prompt=prompt)


def _as_written(op: dict, marker: str) -> dict:
    """An operation with the marker of the data it copied read as spaces: "remove" finds the
    item as recorded."""
    for key in ("value", "values"):
        if isinstance(op.get(key), str):
            op[key] = as_written(op[key], marker)
        elif isinstance(op.get(key), list):
            op[key] = [as_written(item, marker) for item in op[key]]
    return op


def modify_world(
    *, user_id: int, question: str, history: list[dict], marker: str = ""
) -> WorldChange:
    """The world-modifier step: propose, then apply what is valid (source "turn").

    Never raises for the model's sake: when it fails, nothing is applied and `error` says why
    in one sentence.
    """
    state = world_state_for(user_id=user_id)
    try:
        proposed = propose_world_ops(state=state, question=question, history=history, marker=marker)
    except Preempted:
        raise
    except LLMError as exc:
        logger.info("the world modifier's model failed; the world state stays: %s", exc)
        detail = " ".join(str(exc).split())[:240] or type(exc).__name__
        return WorldChange(
            state=state,
            version=state.version,
            error=f"The world state was left unchanged: the model failed ({detail}).",
        )
    change = world_apply(
        user_id=user_id,
        ops=[_as_written(op.model_dump(exclude_none=True), marker) for op in proposed.ops],
        source="turn",
    )
    return dataclasses.replace(change, reason=proposed.reason[:300])


def world_after_answer(*, route: RouteDecision, config: RuntimeConfig) -> bool:
    """Whether the turn asks the world modifier, after its answer: the rules routed it there,
    or, with the router's model on, no rule placed a personal message."""
    return route.route == WORLD or (config.router_model_enabled and route == PERSONAL_DIRECT)


def world_change_after_reply(*, reply_id: int) -> WorldChange | None:
    """The world modifier on the user's message of a saved reply whose turn asked for it; what
    it changed goes in the reply's trace. Claimed on the reply, so it runs once; None when the
    turn asked nothing or another run has it."""
    reply = (
        Message.objects.select_related("conversation", "reply_to")
        .filter(pk=reply_id, role=Message.Role.ASSISTANT)
        .first()
    )
    if reply is None or reply.reply_to is None or not reply.trace.get(WORLD_QUEUED):
        return None
    if not chat_services.message_trace_claim(
        message_id=reply_id, key=TRACE_KEY_WORLD, value={"running": True}
    ):
        return None
    question = reply.reply_to
    history = history_before(message=question, limit=WORLD_HISTORY)
    # A conversation imported from another assistant: its messages are data.
    marker = conversation_marker(reply.conversation_id)
    try:
        change = modify_world(
            user_id=reply.conversation.owner_id,
            question=question.content,
            history=[
                {
                    "role": m.role,
                    "content": datamark(m.content, marker) if "imported" in m.trace else m.content,
                }
                for m in history
            ],
            marker=marker,
        )
    except Preempted:
        # Its task runs it again when the user is quiet, and claims it then.
        chat_services.message_trace_release(message_id=reply_id, key=TRACE_KEY_WORLD)
        raise
    chat_services.message_trace_put(
        message_id=reply_id,
        key=TRACE_KEY_WORLD,
        value={
            "applied": change.applied,
            "rejected": change.rejected,
            "error": change.error,
            "reason": change.reason,
        },
    )
    return change
