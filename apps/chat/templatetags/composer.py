from __future__ import annotations

import math

from django import template

from apps.cognition.message_room import MessageRoom

register = template.Library()


@register.filter
def room_characters(room: MessageRoom) -> int:
    """The room for a message in characters, the unit its writer counts in (static/js/chat.js
    counts the same way: the tokens times the model's characters per token)."""
    return math.floor(room.tokens * room.chars_per_token)
