from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.utils import timezone

from apps.accounts.selectors import user_time_zone


def user_time_zone_middleware(get_response):
    """Dates on the pages in the signed-in user's time zone (their settings), the server's
    for everyone else.

    Async under ASGI, so a request without a signed-in session (the API, the MCP endpoint, the
    login page) costs no thread hop and no database read.
    """
    if iscoroutinefunction(get_response):

        async def middleware(request):
            user = await request.auser() if hasattr(request, "auser") else None
            if user is not None and user.is_authenticated:
                zone = await sync_to_async(user_time_zone)(user=user)
                timezone.activate(zone)
            else:
                timezone.deactivate()
            try:
                return await get_response(request)
            finally:
                timezone.deactivate()

        markcoroutinefunction(middleware)
        return middleware

    def sync_middleware(request):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            timezone.activate(user_time_zone(user=user))
        else:
            timezone.deactivate()
        try:
            return get_response(request)
        finally:
            timezone.deactivate()

    return sync_middleware


user_time_zone_middleware.sync_capable = True
user_time_zone_middleware.async_capable = True
