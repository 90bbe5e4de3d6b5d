from __future__ import annotations

from apps.accounts.models import Theme


def page_preferences(request) -> dict:
    """The signed-in user's theme, and whether their browser's time zone is still to be taken
    (base.html); read by user_time_zone_middleware, so no query here."""
    prefs = getattr(request, "thalamus_settings", None)
    if prefs is None:
        return {"theme": Theme.SYSTEM, "time_zone_pending": False}
    return {"theme": prefs.theme, "time_zone_pending": not prefs.time_zone_chosen}
