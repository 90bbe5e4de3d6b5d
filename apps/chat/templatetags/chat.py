from __future__ import annotations

from django import template
from django.core.exceptions import SynchronousOnlyOperation

from apps.core.selectors import runtime_config

register = template.Library()


@register.simple_tag
def max_message_chars() -> int | None:
    """The message size limit, for the composer's `maxlength`.

    The websocket consumer renders the composer on its event loop, where the ORM may not run: when
    the configuration is not in the cache just then, the composer goes without `maxlength` (the
    server still refuses a message that is too long) rather than fail the push.
    """
    try:
        return runtime_config().max_message_chars
    except SynchronousOnlyOperation:
        return None
