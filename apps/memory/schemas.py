"""Shapes of memory data that arrive from the LLM or from files, validated with Pydantic."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from apps.language.text import visible
from apps.memory.models import WORLD_MAX_CHARS, Category, MemoryNode, WorldState

MAX_PLAN_STEPS = 5


def canonical_predicate_name(raw: str) -> str:
    """`Is Called`, `is-called` and ` is_called ` are one spelling: `is_called`."""
    return re.sub(r"[\s\-]+", "_", raw.strip().lower()).strip("_")


def normal_text(text: str) -> str:
    """A statement's words as compared with another's: single spaces, case folded, without the
    characters a reader cannot see (which every door strips before it stores a text)."""
    return " ".join(visible(text).split()).casefold()


def same_text(a: str, b: str) -> bool:
    """Two statements (memories, triples' objects) that differ only in spacing and case."""
    return normal_text(a) == normal_text(b)


class PlanStep(BaseModel):
    model_config = ConfigDict(extra="ignore")

    topic: str = Field(default="", max_length=200)
    types: list[MemoryNode.Kind] = Field(default_factory=list)
    query: str = Field(default="", max_length=1000)
    limit: int = Field(default=5, ge=1, le=50)

    @property
    def search_text(self) -> str:
        return " ".join(part for part in (self.topic, self.query) if part.strip())


class RetrievalPlanSchema(BaseModel):
    """The reflection step's instructions for the next turn's retrieval."""

    steps: list[PlanStep] = Field(default_factory=list, max_length=MAX_PLAN_STEPS)

    @field_validator("steps")
    @classmethod
    def _drop_empty_steps(cls, steps: list[PlanStep]) -> list[PlanStep]:
        return [step for step in steps if step.search_text]


class SeedPredicate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    category: Category = Category.KNOWLEDGE
    aliases: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    single_valued: bool = False


class SeedTriple(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str = Field(min_length=1, max_length=200)
    predicate: str = Field(min_length=1, max_length=100)
    object: str = Field(min_length=1)
    category: Category | None = None
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)


class SeedFact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = Field(min_length=1)
    kind: MemoryNode.Kind = MemoryNode.Kind.FACT
    topic: str = Field(default="", max_length=200)
    fact_key: str = Field(default="", max_length=200)
    importance: float = Field(default=0.7, ge=0.0, le=1.0)


class SeedTruths(BaseModel):
    model_config = ConfigDict(extra="forbid")

    predicates: list[SeedPredicate] = Field(default_factory=list)
    triples: list[SeedTriple] = Field(default_factory=list)
    facts: list[SeedFact] = Field(default_factory=list)


WORLD_PATHS = ("topics", "project", "goals", "behaviour")
WORLD_LIST_PATHS = ("topics", "goals", "behaviour")
WORLD_OPS = ("set", "append", "remove")


def _world_text(text: str, path: str) -> str:
    text = " ".join(visible(text).split())
    if not text:
        raise ValueError(f"an empty text cannot go into {path}")
    if len(text) > WORLD_MAX_CHARS:
        raise ValueError(f"a text in {path} is longer than {WORLD_MAX_CHARS} characters")
    return text


class WorldOp(BaseModel):
    """One change to a user's world state; the only way the world state changes.

    - `set` on `project` takes `value`; on a list path (topics, goals, behaviour) it takes
      `values`, the whole new list (empty clears it).
    - `append` adds `value` to a list path; `project` is one value, so it has no append.
    - `remove` takes `value` out of a list path (compared ignoring case); on `project` it
      clears the project (a `value`, when given, must be the current project).

    Each text is trimmed, its spaces collapsed, 1 to 200 characters. State-dependent rules (the
    list limits, removing what is there) are `world_apply`'s.
    """

    model_config = ConfigDict(extra="forbid")

    op: Literal["set", "append", "remove"]
    path: Literal["topics", "project", "goals", "behaviour"]
    value: str | None = None
    values: list[str] | None = None

    @model_validator(mode="after")
    def _shape(self) -> WorldOp:
        is_list = self.path in WORLD_LIST_PATHS
        if self.op == "set" and is_list:
            if self.values is None:
                raise ValueError(f"set on {self.path} takes values, the whole new list")
            limit = WorldState.LIMITS[self.path]
            unique: dict[str, str] = {}
            for text in self.values:
                text = _world_text(text, self.path)
                unique.setdefault(text.casefold(), text)
            if len(unique) > limit:
                raise ValueError(f"{self.path} holds at most {limit} items")
            self.values = list(unique.values())
            self.value = None
            return self
        if self.values is not None:
            raise ValueError(f"{self.op} on {self.path} takes one value, not values")
        if self.op == "append" and not is_list:
            raise ValueError("project is a single value: use set, not append")
        if self.value is None:
            if self.op == "remove" and not is_list:
                return self
            raise ValueError(f"{self.op} on {self.path} needs a value")
        self.value = _world_text(self.value, self.path)
        return self


def world_op_parse(raw: WorldOp | dict | Any) -> WorldOp | str:
    """The operation, or the one sentence saying why it is not one."""
    if isinstance(raw, WorldOp):
        return raw
    if not isinstance(raw, dict):
        return "an operation must be an object with op, path and value"
    try:
        return WorldOp.model_validate(raw)
    except ValidationError as exc:
        return _world_op_reason(exc, raw)


def _world_op_reason(exc: ValidationError, raw: dict) -> str:
    error = exc.errors()[0]
    where = error["loc"][0] if error["loc"] else ""
    if where == "op":
        return f"unknown operation {raw.get('op')!r}: use set, append or remove"
    if where == "path":
        return (
            f"unknown path {raw.get('path')!r}: the allowed paths are topics, project, "
            "goals and behaviour"
        )
    if error["type"] == "value_error":
        return str(error["ctx"]["error"])
    if error["type"] == "extra_forbidden":
        return f"unknown field {where!r}: an operation has op, path, value and values"
    return f"{where or 'operation'}: {error['msg']}"
