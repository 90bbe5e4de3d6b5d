"""The world state: what the talk is about now, changed only by validated operations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import transaction

from apps.core.models import Event
from apps.core.services import events_record
from apps.memory.models import WorldState
from apps.memory.quarantine import looks_like_instruction
from apps.memory.schemas import WORLD_LIST_PATHS, WorldOp, world_op_parse
from apps.memory.services import memory_hold

# Operations a person wrote by hand: their approval is the writing.
BY_HAND = frozenset({"browser", "admin"})
# A turn that proposes more than this is rambling; the rest are rejected, not guessed at.
MAX_WORLD_OPS = 20


@dataclass
class WorldChange:
    """What one `world_apply` did: the operations applied, those rejected with the reason.

    `changed` is whether the state differs afterwards (then `version` moved by one); `error`
    is set instead when no operations could be had at all (the LLM failed); `reason` is the
    proposer's own word for its operations.
    """

    state: WorldState
    version: int
    applied: list[dict] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)
    changed: bool = False
    error: str = ""
    reason: str = ""

    def as_dict(self) -> dict:
        """For a trace: JSON, without the model instance."""
        return {
            "applied": self.applied,
            "rejected": self.rejected,
            "changed": self.changed,
            "version": self.version,
            "error": self.error,
            "reason": self.reason,
        }


def _short(value, depth: int = 0):
    """A proposed operation as JSON small enough for an event or a trace, whatever it was."""
    if isinstance(value, str):
        return value[:300]
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, list | tuple) and depth < 2:
        return [_short(item, depth + 1) for item in value[:20]]
    if isinstance(value, dict) and depth < 2:
        return {str(key)[:50]: _short(item, depth + 1) for key, item in list(value.items())[:10]}
    return str(value)[:300]


def _op_json(op: WorldOp | dict) -> dict:
    if isinstance(op, WorldOp):
        return op.model_dump(exclude_none=True)
    return _short(op) if isinstance(op, dict) else {"op": _short(op)}


def _world_op_apply(state: WorldState, op: WorldOp) -> str:
    """Apply one valid operation to the locked row; the reason it cannot be, else ""."""
    if op.path not in WORLD_LIST_PATHS:
        if op.op == "set":
            state.project = op.value
        elif op.value and op.value.casefold() != state.project.casefold():
            return f"the active project is {state.project!r}, not {op.value!r}"
        else:
            state.project = ""
        return ""
    if op.op == "set":
        setattr(state, op.path, list(op.values))
        return ""
    items = list(getattr(state, op.path))
    found = [item for item in items if item.casefold() == op.value.casefold()]
    if op.op == "append":
        if found:
            return f"{op.value!r} is already in {op.path}"
        limit = WorldState.LIMITS[op.path]
        if len(items) >= limit:
            return f"{op.path} already holds {limit} items: remove one first"
        items.append(op.value)
    else:
        if not found:
            return f"{op.value!r} is not in {op.path}"
        items.remove(found[0])
    setattr(state, op.path, items)
    return ""


def _held(user_id: int, op: WorldOp) -> WorldOp | str:
    """The operation, or why it is not applied: its instruction-like texts, held. A removal
    writes no text."""
    if op.op == "remove":
        return op
    texts = [text for text in [op.value, *(op.values or [])] if text]
    held = [
        memory_hold(owner=_owner(user_id), text=text, held_from=f"world-state {op.path}")
        for text in texts
        if looks_like_instruction(text)
    ]
    if not held:
        return op
    numbers = ", ".join(str(node.pk) for node in held)
    return f"it reads as an instruction: held for the user's approval (memory {numbers})"


def _owner(user_id: int):
    return get_user_model().objects.get(pk=user_id)


def world_apply(*, user_id: int, ops: Sequence[WorldOp | dict], source: str) -> WorldChange:
    """Apply the valid operations to a user's world state in one transaction.

    An invalid operation, or one the state does not allow (a full list, removing what is not
    there), is returned in `rejected` with a one-sentence reason, never raised; the others
    still apply. The row is locked while they do, created if missing; the version goes up once,
    and one event records what changed, when anything did. `source`: "turn", "reflection",
    "browser", "admin".

    The world state is in every answer's prompt: unless the user wrote the operation by hand
    (in the memory browser or the admin), one whose text reads as an instruction is rejected,
    its text held for the user's approval as a quarantined memory (apps.memory.quarantine).
    """
    parsed: list[tuple[WorldOp | dict, WorldOp]] = []
    rejected: list[dict] = []
    for index, raw in enumerate(ops):
        result = world_op_parse(raw)
        if index >= MAX_WORLD_OPS:
            result = f"at most {MAX_WORLD_OPS} operations are applied at once"
        if not isinstance(result, str) and source not in BY_HAND:
            result = _held(user_id, result)
        if isinstance(result, str):
            rejected.append({"op": _op_json(raw), "reason": result})
        else:
            parsed.append((raw, result))
    if not parsed:
        state = WorldState.objects.filter(owner_id=user_id).first() or WorldState(owner_id=user_id)
        return WorldChange(state=state, version=state.version, rejected=rejected)
    applied: list[dict] = []
    with transaction.atomic():
        WorldState.objects.bulk_create([WorldState(owner_id=user_id)], ignore_conflicts=True)
        state = WorldState.objects.select_for_update().get(owner_id=user_id)
        before = state.as_dict()
        for raw, op in parsed:
            reason = _world_op_apply(state, op)
            if reason:
                rejected.append({"op": _op_json(raw), "reason": reason})
            else:
                applied.append(_op_json(op))
        changed = state.as_dict() != before
        if changed:
            state.proposed = _proposed_after(state, [op for _, op in parsed], source=source)
            state.version += 1
            state.save()
            _record_world_change(state=state, source=source, applied=applied, rejected=rejected)
    return WorldChange(
        state=state, version=state.version, applied=applied, rejected=rejected, changed=changed
    )


def world_items(state: WorldState) -> list[str]:
    """Every text the world state holds: its topics, project, goals and behaviour."""
    project = [state.project] if state.project else []
    return [*state.topics, *project, *state.goals, *state.behaviour]


def _proposed_after(state: WorldState, ops: list[WorldOp], *, source: str) -> list[str]:
    """The state's texts the model proposed, once `ops` applied: those it wrote are added,
    those a person wrote by hand are theirs, and texts no longer held are dropped."""
    written = {
        text.casefold(): text for op in ops for text in [op.value, *(op.values or [])] if text
    }
    proposed = {text.casefold(): text for text in state.proposed}
    for key, text in written.items():
        if source in BY_HAND:
            proposed.pop(key, None)
        else:
            proposed[key] = text
    held = {text.casefold() for text in world_items(state)}
    return [text for key, text in proposed.items() if key in held]


# What each part of the world state is, as the mind stream says it to the user.
_WORLD_WORDS = {
    "topics": "what we talk about",
    "project": "your project",
    "goals": "your goals",
    "behaviour": "how you want me to answer",
}


def _world_change_words(op: dict) -> str:
    where = _WORLD_WORDS.get(op.get("path", ""), op.get("path", ""))
    value = op.get("value")
    if op.get("op") == "append":
        return f"added “{value}” to {where}"
    if op.get("op") == "remove":
        return f"took “{value}” out of {where}" if value else f"cleared {where}"
    return f"changed {where}"


def _world_sentence(applied: list[dict], *, source: str) -> str:
    """ "From what you said, I added “Answer in French” to how you want me to answer." """
    changes = "; ".join(_world_change_words(op) for op in applied)
    who = {"browser": "You", "admin": "An admin"}.get(source, "From what you said, I")
    return f"{who} {changes}."


def _record_world_change(
    *, state: WorldState, source: str, applied: list[dict], rejected: list[dict]
) -> None:
    events_record(
        [
            Event(
                kind=Event.Kind.EDIT,
                owner_id=state.owner_id,
                summary=_world_sentence(applied, source=source),
                payload={
                    "action": "world",
                    "source": source,
                    "version": state.version,
                    "applied": applied,
                    "rejected": rejected,
                    "state": state.as_dict(),
                },
            )
        ]
    )
