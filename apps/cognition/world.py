"""The world modifier: the LLM proposes changes to the user's world state, the service judges.

The model only proposes operations (set / append / remove on topics, project, goals,
behaviour); `world_apply` validates each one and commits the valid ones in one transaction.
The proposal's schema is lenient on purpose: an operation on an unknown path must reach
`world_apply` and come back rejected with its reason, not fail the whole reply.
"""

from __future__ import annotations

import dataclasses
import json
import logging

from pydantic import BaseModel, ConfigDict, Field

from apps.core.llm.fitting import Piece, bodies, fixed_lines, template_prompt
from apps.core.llm.limits import ROUTER
from apps.core.llm.outcomes import LLMError
from apps.core.llm.structured import complete_as
from apps.memory.models import WorldState
from apps.memory.schemas import WORLD_OPS, WORLD_PATHS
from apps.memory.selectors import world_state_for
from apps.memory.world_services import WorldChange, world_apply

logger = logging.getLogger(__name__)

# How many earlier messages the world modifier's model sees.
WORLD_HISTORY = 6


class ProposedWorldOp(BaseModel):
    """An operation as the model wrote it; `world_apply` decides whether it is one."""

    model_config = ConfigDict(extra="ignore")

    op: str = Field(json_schema_extra={"enum": list(WORLD_OPS)})
    path: str = Field(json_schema_extra={"enum": list(WORLD_PATHS)})
    value: str | None = None
    values: list[str] | None = Field(
        default=None, description="Only for set on topics, goals or behaviour: the whole list."
    )


class WorldOps(BaseModel):
    """What the world modifier's model must answer."""

    model_config = ConfigDict(extra="ignore")

    ops: list[ProposedWorldOp]
    reason: str = Field(default="", description="One short sentence.")


def state_lines(state: WorldState) -> list[str]:
    """The record as the model sees it: every path, with its JSON value."""
    return [
        f"{path}: {json.dumps(value, ensure_ascii=False)}"
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


def propose_world_ops(*, state: WorldState, question: str, history: list[dict]) -> WorldOps:
    """One short structured call to the router's model (a foreground role: no waiting for the
    chat). Raises the gateway's outcomes."""
    prompt = template_prompt(
        "world",
        slots={
            "state": fixed_lines(state_lines(state)),
            "history": _history_pieces(history),
            "message": bodies([question]),
        },
        empty="(none)",
    )
    return complete_as(WorldOps, role=ROUTER, prompt=prompt)


def modify_world(*, user_id: int, question: str, history: list[dict]) -> WorldChange:
    """The world-modifier step: propose, then apply what is valid (source "turn").

    Never raises for the model's sake: when it fails, nothing is applied and `error` says why
    in one sentence.
    """
    state = world_state_for(user_id=user_id)
    try:
        proposed = propose_world_ops(state=state, question=question, history=history)
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
        ops=[op.model_dump(exclude_none=True) for op in proposed.ops],
        source="turn",
    )
    return dataclasses.replace(change, reason=proposed.reason[:300])
