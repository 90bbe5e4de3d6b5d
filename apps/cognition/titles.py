"""A conversation's title, from its first exchange."""

from __future__ import annotations

from apps.chat.models import Message
from apps.cognition.reflection import as_shown
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
from apps.memory.provenance import conversation_marker, marker_system


def generate_title(*, messages: list[Message]) -> str:
    """A title for the conversation from its first exchange; "" when the model's is junk. An
    exchange imported from another assistant (an import with no title) is data: datamarked."""
    marker = conversation_marker(messages[0].conversation_id) if messages else ""
    lines = [f"{m.role}: {as_shown(m, marker)}" for m in messages]
    prompt = template_prompt(
        "title", slots={"exchange": bodies(lines)}, system=marker_system(marker, lines)
    )
    reply = gateway.complete(role=TITLE, prompt=prompt, max_tokens=TITLE_MAX_TOKENS)
    return clean_title(reply.content)
