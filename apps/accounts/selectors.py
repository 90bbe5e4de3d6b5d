from __future__ import annotations

import hmac

from django.db.models import QuerySet

from apps.accounts.models import ApiKey
from apps.accounts.services import API_KEY_SCHEME, hash_api_key


def api_keys_for_user(*, user) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(user=user).order_by("-created_at", "-pk")


def api_key_for_user(*, user, pk: int) -> ApiKey | None:
    return ApiKey.objects.filter(user=user, pk=pk).first()


def api_key_for_token(*, token: str) -> ApiKey | None:
    """The live key a bearer token belongs to, or None (unknown, revoked, or inactive user)."""
    scheme, _, rest = token.partition("_")
    prefix, _, random_part = rest.partition("_")
    if scheme != API_KEY_SCHEME or len(prefix) != 8 or not random_part:
        return None
    key = (
        ApiKey.objects.select_related("user")
        .filter(prefix=prefix, revoked_at=None, user__is_active=True)
        .first()
    )
    if key is None or not hmac.compare_digest(key.hashed_key, hash_api_key(token)):
        return None
    return key
