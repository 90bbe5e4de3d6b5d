from __future__ import annotations

from django.conf import settings

DEMO_BANNER_COOKIE = "demo_banner_dismissed"


def product(request) -> dict:
    return {
        "demo_mode": settings.THALAMUS_DEMO,
        # Read here so a dismissed banner is never drawn, rather than drawn and then hidden.
        "demo_banner_dismissed": request.COOKIES.get(DEMO_BANNER_COOKIE) == "1",
        "open_signup": settings.THALAMUS_OPEN_SIGNUP,
    }
