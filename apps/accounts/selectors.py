from __future__ import annotations

import hmac
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from apps.accounts.models import AdminViewing, ApiKey, UserSettings
from apps.accounts.services import API_KEY_SCHEME, hash_api_key
from apps.core.db import RowModel, fetch_hot
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config


def api_keys_for_user(*, user) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(user=user).order_by("-created_at", "-pk")


def api_key_for_user(*, user, pk: int) -> ApiKey | None:
    return ApiKey.objects.filter(user=user, pk=pk).first()


_KEY = RowModel(ApiKey)
_USER = RowModel(get_user_model())
_SETTINGS = RowModel(UserSettings)
# The live key with its user and the user's settings (a turn reads them before its answer):
# one statement with its parameters bound, where the ORM's query with two joins cost a
# millisecond or more of the web process's CPU on every call.
_KEY_SQL = f"""
SELECT {_KEY.columns("k")}, {_USER.columns("u")}, {_SETTINGS.columns("s")}
  FROM {ApiKey._meta.db_table} k
  JOIN {_USER.model._meta.db_table} u ON u.{_USER.model._meta.pk.column} = k.user_id
  LEFT JOIN {UserSettings._meta.db_table} s ON s.user_id = k.user_id
 WHERE k.prefix = %(prefix)s AND k.revoked_at IS NULL AND u.is_active
 ORDER BY k.id
 LIMIT 1
"""


def api_key_for_token(*, token: str) -> ApiKey | None:
    """The live key a bearer token belongs to, or None (unknown, revoked, or inactive user).
    Its user comes with it, and the user's settings (`user_settings_loaded`)."""
    scheme, _, rest = token.partition("_")
    prefix, _, random_part = rest.partition("_")
    if scheme != API_KEY_SCHEME or len(prefix) != 8 or not random_part:
        return None
    rows = fetch_hot(_KEY_SQL, {"prefix": prefix}, prepare=True)
    if not rows:
        return None
    row = rows[0]
    key = _KEY.load(row[: _KEY.width])
    if not hmac.compare_digest(key.hashed_key, hash_api_key(token)):
        return None
    key.user = _USER.load(row[_KEY.width : _KEY.width + _USER.width])
    found = row[_KEY.width + _USER.width :]
    # (No row: the user never changed a setting; the defaults, unsaved.)
    key.user.thalamus_settings = (
        _SETTINGS.load(found) if found[0] is not None else UserSettings(user_id=key.user.pk)
    )
    return key


def user_settings_for(*, user) -> UserSettings:
    """The user's settings; the defaults (unsaved) for one who never changed them."""
    if user is None or not getattr(user, "pk", None):
        return UserSettings()
    found = UserSettings.objects.filter(user_id=user.pk).first()
    return found if found is not None else UserSettings(user_id=user.pk)


def user_settings_loaded(*, user) -> UserSettings:
    """The settings of a user read with them (`api_key_for_token`, or
    `select_related("thalamus_settings")`), without another statement; the defaults for one who
    never changed them."""
    try:
        return user.thalamus_settings
    except UserSettings.DoesNotExist:
        return UserSettings(user_id=user.pk)


def knowledge_language_of(prefs: UserSettings, config: RuntimeConfig) -> str:
    """The language the knowledge block is written in for these settings' user: theirs, else
    the site's."""
    return prefs.knowledge_language or config.renderer_language


def user_knowledge_language(*, user, config: RuntimeConfig | None = None) -> str:
    return knowledge_language_of(user_settings_for(user=user), config or runtime_config())


def user_time_zone(*, user) -> str:
    """The user's IANA time zone; the server's when unset or no longer known."""
    return time_zone_of(user_settings_for(user=user))


def time_zone_of(prefs: UserSettings) -> str:
    """The settings' IANA time zone; the server's when unset or no longer known."""
    return prefs.time_zone if is_time_zone(prefs.time_zone) else settings.TIME_ZONE


def is_time_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return bool(name)


def custom_instructions(settings_: UserSettings) -> str:
    """The user's own words for the system prompt: who they are and how to answer; "" if none."""
    parts = []
    if settings_.about_me.strip():
        parts.append(f"About the user:\n{settings_.about_me.strip()}")
    if settings_.answer_style.strip():
        parts.append(f"How to answer:\n{settings_.answer_style.strip()}")
    return "\n\n".join(parts)


def memory_enabled_for(*, user_id: int) -> bool:
    """Whether the user's turns read memory and teach it (on unless they turned it off)."""
    return not UserSettings.objects.filter(user_id=user_id, memory_enabled=False).exists()


def admin_viewings_for(*, user, limit: int = 5) -> list[AdminViewing]:
    """The latest times an admin looked at `user`'s memories, newest first."""
    return list(
        AdminViewing.objects.filter(owner=user)
        .select_related("viewer")
        .order_by("-viewed_at", "-pk")[:limit]
    )
