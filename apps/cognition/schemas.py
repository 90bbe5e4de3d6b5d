"""What the background LLM calls must answer, as Pydantic models (asked by the gateway)."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from apps.memory.models import Category, MemoryNode
from apps.memory.schemas import MAX_PLAN_STEPS, PlanStep


class LearntMemory(BaseModel):
    model_config = ConfigDict(extra="ignore")

    action: Literal["add", "update", "leave"]
    existing_id: int | None = Field(
        default=None, description="Id of the known memory this updates or restates, if any."
    )
    description: str = Field(min_length=1, max_length=1000)
    kind: MemoryNode.Kind
    topic: str = Field(max_length=200)
    fact_key: str = Field(max_length=200)
    importance: float = Field(ge=0.0, le=1.0)
    origin: str = Field(default="", max_length=1000)
    source: Literal["user", "inferred"] = Field(
        default="inferred",
        description="user: the user said it in this exchange; inferred: concluded from it.",
    )
    quote: str = Field(
        default="",
        max_length=1000,
        description="For source user: the exact words of the user's message it comes from.",
    )
    valid_until: date | None = Field(
        default=None,
        description="The last day it holds, for what is true only for a while (an exam "
        "tomorrow); null otherwise.",
    )
    # What it is about; reflection drops one of a category the user does not let be learnt.
    category: Category | None = None


class LearntTriple(BaseModel):
    model_config = ConfigDict(extra="ignore")

    subject: str = Field(min_length=1, max_length=200)
    predicate: str = Field(min_length=1, max_length=100)
    object: str = Field(min_length=1, max_length=1000)
    category: Category | None = None
    confidence: float = Field(default=0.6, ge=0.0, le=1.0)


class Reflection(BaseModel):
    model_config = ConfigDict(extra="ignore")

    memories: list[LearntMemory]
    triples: list[LearntTriple]
    next_retrieval_plan: list[PlanStep] = Field(max_length=MAX_PLAN_STEPS)
    topics: list[str] = Field(
        default_factory=list,
        description="Short noun phrases naming what the conversation is about now.",
    )


class CriticVerdict(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # The debate comes first so the model argues before it decides.
    debate: str = Field(min_length=1)
    verdict: Literal["withstands", "fails"]
    contradicts: list[int] = Field(default_factory=list)
    supports: list[int] = Field(default_factory=list)


class EpisodeSummary(BaseModel):
    model_config = ConfigDict(extra="ignore")

    summary: str = Field(min_length=1)
    decisions: str
    outcome: str
    lesson: str
