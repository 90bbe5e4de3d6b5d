from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from apps.accounts.models import AdminViewing, ApiKey, UserSettings
from apps.accounts.sockets import user_sockets_close

API_KEY_SCHEME = "thk"


def user_create(*, username: str, password: str):
    """A new user account; the sign-up form has already validated the password."""
    return get_user_model().objects.create_user(username=username, password=password)


def hash_api_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def api_key_create(*, user, name: str) -> tuple[ApiKey, str]:
    """Make a key and return it with its secret, which is never stored and shown only now."""
    prefix = secrets.token_hex(4)
    secret = f"{API_KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(
        user=user, name=name.strip()[:100], prefix=prefix, hashed_key=hash_api_key(secret)
    )
    return key, secret


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    """Revoke the key; the user's open sockets close too, as after a logout: a key is revoked
    when it may have leaked, and the pages reconnect only with a valid session."""
    if ApiKey.objects.filter(pk=key.pk, revoked_at=None).update(revoked_at=timezone.now()):
        user_sockets_close(user_id=key.user_id)
    key.refresh_from_db(fields=["revoked_at"])
    return key


# A key's last use is written at most this often: every call of a chatty client would otherwise
# pay a row update before its answer starts.
KEY_USE_RESOLUTION = timedelta(minutes=1)


def api_key_mark_used(*, key: ApiKey) -> None:
    now = timezone.now()
    if key.last_used_at is not None and now - key.last_used_at < KEY_USE_RESOLUTION:
        return
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    key.last_used_at = now


def user_settings_update(*, user, **values) -> UserSettings:
    """Save the given settings of the user (the form has validated them). A time zone saved
    here is the user's choice: the browser's is no longer taken."""
    allowed = {
        "memory_enabled",
        "about_me",
        "answer_style",
        "knowledge_language",
        "learn_categories",
        "time_zone",
        "theme",
    }
    unknown = set(values) - allowed
    if unknown:
        raise ValueError(f"unknown settings: {sorted(unknown)}")
    if "time_zone" in values:
        values["time_zone_chosen"] = True
    found, _ = UserSettings.objects.update_or_create(user=user, defaults=values)
    return found


def user_time_zone_detect(*, user, time_zone: str) -> bool:
    """Take the browser's time zone (already validated) as the user's, unless they have chosen
    one or one was taken before; whether it was taken."""
    UserSettings.objects.get_or_create(user=user)
    return bool(
        UserSettings.objects.filter(user=user, time_zone_chosen=False).update(
            time_zone=time_zone, time_zone_chosen=True, updated_at=timezone.now()
        )
    )


# Views of one user's memories by one admin in one place within this window are one viewing.
ADMIN_VIEWING_WINDOW = timedelta(minutes=10)


def admin_viewing_record(*, viewer, owner_ids, place: str) -> int:
    """Record that staff `viewer` looked at the memories of the users `owner_ids` (their own
    and global knowledge are not recorded); returns how many viewings were new."""
    others = {pk for pk in owner_ids if pk is not None and pk != viewer.pk}
    if not others:
        return 0
    recent = set(
        AdminViewing.objects.filter(
            viewer=viewer,
            place=place,
            owner_id__in=others,
            viewed_at__gte=timezone.now() - ADMIN_VIEWING_WINDOW,
        ).values_list("owner_id", flat=True)
    )
    new = [AdminViewing(viewer=viewer, owner_id=pk, place=place) for pk in sorted(others - recent)]
    AdminViewing.objects.bulk_create(new)
    return len(new)
