"""What the background LLM calls must answer, as Pydantic models, and the one way to ask.

The JSON schema of a model is sent as `response_format`; a reply that does not validate gets
one repair attempt, then `InvalidReply` — the caller writes nothing.
"""

from __future__ import annotations

from typing import Literal, TypeVar

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from apps.core.llm import llm_client
from apps.core.selectors import runtime_config
from apps.memory.models import Category, MemoryNode
from apps.memory.schemas import MAX_PLAN_STEPS, PlanStep

Shape = TypeVar("Shape", bound=BaseModel)

REPAIR_REQUEST = (
    "That reply does not match the required JSON schema: {errors}\n"
    "Reply again with only the corrected JSON object."
)


class InvalidReply(Exception):
    """The LLM's reply did not validate, even after a repair attempt."""


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


def _ask(*, messages: list[dict], model: str, schema: type[BaseModel]) -> str:
    config = runtime_config()
    response = llm_client(
        base_url=config.llm_base_url or settings.THALAMUS_LLM_BASE_URL,
        timeout=settings.THALAMUS_LLM_TIMEOUT,
    ).chat.completions.create(
        model=model,
        messages=messages,
        temperature=0.2,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
        },
    )
    return response.choices[0].message.content or ""


def complete_as(schema: type[Shape], *, messages: list[dict], model: str) -> Shape:
    """Ask for a reply of `schema`'s shape; transient openai errors propagate for the task."""
    reply = _ask(messages=messages, model=model, schema=schema)
    try:
        return schema.model_validate_json(reply)
    except ValidationError as exc:
        errors = _error_sentence(exc)
    repair = [
        *messages,
        {"role": "assistant", "content": reply},
        {"role": "user", "content": REPAIR_REQUEST.format(errors=errors)},
    ]
    reply = _ask(messages=repair, model=model, schema=schema)
    try:
        return schema.model_validate_json(reply)
    except ValidationError as exc:
        raise InvalidReply(_error_sentence(exc)) from exc


def _error_sentence(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, error['loc'])) or 'reply'}: {error['msg']}"
        for error in exc.errors()[:5]
    )
