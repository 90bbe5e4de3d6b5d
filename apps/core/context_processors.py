from __future__ import annotations

from django.conf import settings


def product(request) -> dict:
    return {
        "demo_mode": settings.THALAMUS_DEMO,
        "open_signup": settings.THALAMUS_OPEN_SIGNUP,
    }
