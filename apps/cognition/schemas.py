"""What the background LLM calls must answer, as Pydantic models (asked by the gateway)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

# One call asks only which words of the user's messages state something about the user: a
# 135M model finishes that within a few hundred tokens, and the rules do the rest
# (apps.cognition.statements). Bounded so that it must finish: at most this many quotes per
# message, each at most this long.
QUOTES_PER_MESSAGE = 2
QUOTE_MAX_CHARS = 120
Quote = Annotated[str, Field(max_length=QUOTE_MAX_CHARS)]


def message_key(index: int) -> str:
    return f"message_{index + 1}"


def stated_quotes_schema(messages: int) -> type[BaseModel]:
    """The shape of the extraction reply for `messages` user messages: one list of quotes per
    message, in order (a small model keeps to its message better with a key for each)."""
    fields = {
        message_key(index): (list[Quote], Field(max_length=QUOTES_PER_MESSAGE))
        for index in range(messages)
    }
    return create_model("StatedQuotes", __config__=ConfigDict(extra="ignore"), **fields)


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
