"""A conversation's title, from its first exchange."""

from __future__ import annotations

from apps.chat.models import Message
from apps.cognition.runaway import clean_title
from apps.core.llm import gateway
from apps.core.llm.fitting import (
    bodies,
    template_prompt,
)
from apps.core.llm.limits import (
    TITLE,
    TITLE_MAX_TOKENS,
)


def generate_title(*, messages: list[Message]) -> str:
    """A title for the conversation from its first exchange; "" when the model's is junk."""
    prompt = template_prompt(
        "title", slots={"exchange": bodies([f"{m.role}: {m.content}" for m in messages])}
    )
    reply = gateway.complete(role=TITLE, prompt=prompt, max_tokens=TITLE_MAX_TOKENS)
    return clean_title(reply.content)
