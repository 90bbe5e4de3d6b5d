"""How long a user's message may be: what the chat model's window leaves it.

The answer's prompt drops history and memories before it fails (`turn_request.build_turn`), but
it never cuts the system prompt or the message; a message that does not fit beside the system
prompt fails with MessageTooLong. The composer shows this room as the user types and the send
path refuses a message over it before saving, with the same estimate the fit uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from apps.accounts.selectors import (
    custom_instructions,
    knowledge_language_of,
    time_zone_of,
    user_settings_for,
)
from apps.cognition.system_prompt import system_prompt
from apps.cognition.turn_memory import memory_on
from apps.cognition.turn_request import note_fixed
from apps.core.llm.limits import CHAT, TOKENS_PER_MESSAGE, prompt_and_limits
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config
from apps.memory.provenance import conversation_marker
from apps.memory.renderer import render_world
from apps.memory.selectors import world_state_for


@dataclass(frozen=True)
class MessageRoom:
    """The tokens a message may take, and the chat model's characters per token."""

    tokens: int
    chars_per_token: float

    @property
    def characters(self) -> int:
        """The room in characters, the unit its writer counts in (static/js/chat.js counts the
        same way: the tokens times the model's characters per token)."""
        return math.floor(self.tokens * self.chars_per_token)

    def tokens_of(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def refusal(self, text: str) -> str:
        """Why `text` cannot be sent; "" when it fits."""
        needed = self.tokens_of(text)
        if needed <= self.tokens:
            return ""
        over = max(len(text) - self.characters, 1)
        return (
            f"Your message is about {over:,} characters too long for this model. "
            "Shorten it, or send it in parts."
        )


def message_room(*, user, conversation=None, config: RuntimeConfig | None = None) -> MessageRoom:
    """What the chat model's window leaves `user`'s next message in `conversation` (None: a
    conversation not started yet): the prompt's budget minus the system prompt, the note's
    tags and the message's own markers, as `build_turn` counts them."""
    config = config or runtime_config()
    template, limits, counter = prompt_and_limits("answer", CHAT, config)
    prefs = user_settings_for(user=user)
    world = world_data = marker = ""
    language = knowledge_language_of(prefs, config)
    if memory_on(user=user, conversation=conversation, prefs=prefs):
        state = world_state_for(user_id=user.pk)
        marker = conversation_marker(getattr(conversation, "pk", None))
        world = render_world(state, language=language, proposed=False)
        world_data = render_world(state, language=language, proposed=True, marker=marker)
    system = system_prompt(
        template=template,
        time_zone=time_zone_of(prefs),
        user_name=user.get_full_name() or user.get_username(),
        world=world,
        instructions=custom_instructions(prefs),
        marker=marker,
    )
    fixed = (
        counter.text(system)
        + TOKENS_PER_MESSAGE
        + counter.text(note_fixed(language=language, world_data=world_data))
        + TOKENS_PER_MESSAGE
    )
    return MessageRoom(max(limits.prompt_budget - fixed, 0), counter.chars_per_token)
