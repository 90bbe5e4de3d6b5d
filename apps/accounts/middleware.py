from __future__ import annotations

from django.utils import timezone

from apps.accounts.selectors import user_time_zone


def user_time_zone_middleware(get_response):
    """Dates on the pages in the signed-in user's time zone (their settings), the server's
    for everyone else."""

    def middleware(request):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            timezone.activate(user_time_zone(user=user))
        else:
            timezone.deactivate()
        try:
            return get_response(request)
        finally:
            timezone.deactivate()

    return middleware
