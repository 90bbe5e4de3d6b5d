from __future__ import annotations

from django import template

from apps.cognition.message_room import MessageRoom

register = template.Library()


@register.filter
def room_characters(room: MessageRoom) -> int:
    """The room for a message in characters (MessageRoom.characters)."""
    return room.characters
