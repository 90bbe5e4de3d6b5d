from __future__ import annotations

from django import template

from apps.chat.models import Message
from apps.chat.selectors import branch_place

register = template.Library()


@register.simple_tag
def branch_of(message: Message) -> Message:
    """The message with its place among its siblings (the page's list has it already; a pushed
    message reads it)."""
    return branch_place(message=message)
