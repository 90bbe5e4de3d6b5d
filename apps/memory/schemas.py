"""Shapes of memory data that arrive from the LLM or from files, validated with Pydantic."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from apps.memory.models import Category, MemoryNode

MAX_PLAN_STEPS = 5


def canonical_predicate_name(raw: str) -> str:
    """`Is Called`, `is-called` and ` is_called ` are one spelling: `is_called`."""
    return re.sub(r"[\s\-]+", "_", raw.strip().lower()).strip("_")


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
