"""A user's open websockets end with their sign-in: on logout, a password change or an API
key's revocation, every chat and dashboard socket of theirs is closed.

Each consumer joins `user_sockets_group(user.pk)` and closes on a `session.ended` event. A page
whose socket closes reconnects by itself; the middleware then finds no valid session after a
logout or a password change and the consumer refuses it (4401).
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

SESSION_ENDED = "session.ended"
# The close code of a socket whose sign-in ended, as for a socket opened without one.
SIGNED_OUT_CLOSE_CODE = 4401


def user_sockets_group(user_id: int) -> str:
    return f"sockets-{user_id}"


def user_sockets_close(*, user_id: int) -> None:
    """Close every open socket of the user, once the change that ends the sign-in is committed."""

    def send() -> None:
        async_to_sync(get_channel_layer().group_send)(
            user_sockets_group(user_id), {"type": SESSION_ENDED}
        )

    transaction.on_commit(send)


def close_sockets_on_logout(sender, request, user, **kwargs) -> None:
    """Receiver of Django's `user_logged_out`, sent by the site's and the admin's logout."""
    if user is not None:
        user_sockets_close(user_id=user.pk)


class PasswordChangeClosesSockets:
    """Not a rule for passwords: Django tells every password validator when a user's password
    changes, on every path (the admin's forms, `changepassword`, `set_password` then `save`),
    which makes this the one place that hears of them all."""

    def validate(self, password, user=None) -> None:
        return None

    def get_help_text(self) -> str:
        return "Changing your password signs out the pages you have open elsewhere."

    def password_changed(self, password, user=None) -> None:
        # A user who never signed in (one just created) has no socket to close.
        if user is not None and user.pk is not None and user.last_login is not None:
            user_sockets_close(user_id=user.pk)
