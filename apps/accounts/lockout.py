"""What a login locked out by django-axes gets: a page saying when to try again."""

from __future__ import annotations

from django.conf import settings
from django.shortcuts import render


def lockout_seconds() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds())


def lockout_sentence(seconds: int) -> str:
    minutes, rest = divmod(seconds, 60)
    if minutes and not rest:
        wait = f"{minutes} minute{'' if minutes == 1 else 's'}"
    else:
        wait = f"{seconds} second{'' if seconds == 1 else 's'}"
    return f"Too many failed logins for this account or from this address. Try again in {wait}."


def login_locked_out(request, response=None, credentials=None):
    """AXES_LOCKOUT_CALLABLE, for the site's login and the admin's alike.

    Every attempt during a lockout starts it again (axes' default), so the wait is always the
    whole lockout.
    """
    seconds = lockout_seconds()
    locked = render(
        request,
        "accounts/locked_out.html",
        {"sentence": lockout_sentence(seconds)},
        status=429,
    )
    locked["Retry-After"] = str(seconds)
    return locked
