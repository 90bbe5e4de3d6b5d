"""What the background LLM calls must answer, as Pydantic models (asked by the gateway)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

# One call asks only which words of the user's messages state something about the user: a
# 135M model finishes that within a few hundred tokens, and the rules do the rest
# (apps.cognition.statements). Bounded so that it must finish: at most this many quotes per
# message, each at most this long, and never longer than the longest message quoted (a server
# that takes the schema as a grammar stops a quote there).
QUOTES_PER_MESSAGE = 2
QUOTE_MAX_CHARS = 120
# What the longest reply the schema allows costs, in tokens, counted high: a quote's text at two
# characters a token, and the JSON around it, one quote or key a line (a quote filled with
# "I'm a mom. " took 2.75 characters a token in SmolLM2's vocabulary, and each quote's line
# about 8 more: tests/real_llm/test_real_reflection.py tokenizes that reply on the real server).
_TOKENS_AROUND_REPLY = 8
_TOKENS_AROUND_MESSAGE = 10
_TOKENS_AROUND_QUOTE = 8
_QUOTE_CHARS_PER_TOKEN = 2


def message_key(index: int) -> str:
    return f"message_{index + 1}"


def quote_max_chars(said: list[str]) -> int:
    """The longest quote worth allowing of these messages: the longest of them, at most
    QUOTE_MAX_CHARS (and at least 1, which a schema needs)."""
    return max(1, min(QUOTE_MAX_CHARS, max((len(text) for text in said), default=1)))


def stated_quotes_schema(messages: int, quote_chars: int = QUOTE_MAX_CHARS) -> type[BaseModel]:
    """The shape of the extraction reply for `messages` user messages: one list of quotes per
    message, in order (a small model keeps to its message better with a key for each), each
    quote at most `quote_chars` long."""
    # The schema says the limits (a grammar holds the model to them); a server that ignores
    # them may still send a longer quote or more of them, which are cut to the limits rather
    # than failing the whole reply: grounding then finds each in a message or rejects it.
    quote = Annotated[
        str,
        BeforeValidator(lambda value: value[:quote_chars] if isinstance(value, str) else value),
        Field(max_length=quote_chars),
    ]
    quotes = Annotated[
        list[quote],
        BeforeValidator(
            lambda value: value[:QUOTES_PER_MESSAGE] if isinstance(value, list) else value
        ),
        Field(max_length=QUOTES_PER_MESSAGE),
    ]
    fields = {message_key(index): (quotes, ...) for index in range(messages)}
    return create_model("StatedQuotes", __config__=ConfigDict(extra="ignore"), **fields)


def stated_quotes_max_tokens(messages: int, quote_chars: int = QUOTE_MAX_CHARS) -> int:
    """Tokens enough for the longest reply `stated_quotes_schema` allows, so that a model that
    fills every quote to its limit (SmolLM2-135M repeats a phrase until it is stopped) still
    ends its JSON instead of being cut inside a string."""
    quote = _TOKENS_AROUND_QUOTE + -(-quote_chars // _QUOTE_CHARS_PER_TOKEN)
    return _TOKENS_AROUND_REPLY + messages * (_TOKENS_AROUND_MESSAGE + QUOTES_PER_MESSAGE * quote)


# The critic's argument: a few sentences (a 135M model otherwise argues until its cap).
DEBATE_MAX_CHARS = 400


class CriticVerdict(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # The debate comes first so the model argues before it decides.
    debate: Annotated[
        str,
        BeforeValidator(
            lambda value: value[:DEBATE_MAX_CHARS] if isinstance(value, str) else value
        ),
        Field(min_length=1, max_length=DEBATE_MAX_CHARS),
    ]
    verdict: Literal["withstands", "fails"]
    contradicts: list[int] = Field(default_factory=list)
    supports: list[int] = Field(default_factory=list)


def critic_verdict_schema(known: list[int]) -> type[CriticVerdict]:
    """The verdict on one memory shown beside the `known` memories (their ids): it may name
    only those as contradicted or supported, each once at most, so a grammar bounds its lists
    by what it was asked to judge and its reply has a longest length. An id it was not shown
    is dropped later (critic.node_criticise), as before."""
    ids = Literal[tuple(known)] if known else int
    # A server without the grammar may name others, or one twice: kept are the ones shown.
    shown = BeforeValidator(
        lambda value: (
            list(dict.fromkeys(i for i in value if i in known))
            if isinstance(value, list)
            else value
        )
    )
    named = Annotated[list[ids], shown, Field(default_factory=list, max_length=len(known))]
    return create_model(
        "CriticVerdict",
        __base__=CriticVerdict,
        contradicts=(named, ...),
        supports=(named, ...),
    )


class EpisodeSummary(BaseModel):
    model_config = ConfigDict(extra="ignore")

    summary: str = Field(min_length=1)
    decisions: str
    outcome: str
    lesson: str
