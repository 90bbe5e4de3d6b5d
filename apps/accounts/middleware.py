from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.utils import timezone

from apps.accounts.selectors import time_zone_of, user_settings_for


def user_time_zone_middleware(get_response):
    """Dates on the pages in the signed-in user's time zone (their settings), the server's
    for everyone else. The settings read stay on the request (`thalamus_settings`) for the
    page's theme (apps/accounts/context_processors.py).

    Async under ASGI, so a request without a signed-in session (the API, the MCP endpoint, the
    login page) costs no thread hop and no database read.
    """
    if iscoroutinefunction(get_response):

        async def middleware(request):
            user = await request.auser() if hasattr(request, "auser") else None
            if user is not None and user.is_authenticated:
                prefs = await sync_to_async(user_settings_for)(user=user)
                request.thalamus_settings = prefs
                timezone.activate(time_zone_of(prefs))
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
            request.thalamus_settings = user_settings_for(user=user)
            timezone.activate(time_zone_of(request.thalamus_settings))
        else:
            timezone.deactivate()
        try:
            return get_response(request)
        finally:
            timezone.deactivate()

    return sync_middleware


user_time_zone_middleware.sync_capable = True
user_time_zone_middleware.async_capable = True
