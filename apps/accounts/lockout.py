"""Failed logins: who is locked out, for how long, and what the login page says.

Three counts, each in Redis, each expiring by itself (OWASP's authentication cheat sheet:
lock the account, not the network; throttle an address that tries many accounts):

- the (account, address) pair, kept by django-axes: `AXES_FAILURE_LIMIT` failures lock that
  account from that address. One person's typos lock out no one else behind the same router.
- the account from every address: `THALAMUS_LOGIN_ACCOUNT_ATTEMPTS` failures (many more) lock
  it against guessing spread over many addresses.
- the address across accounts: failures for `THALAMUS_LOGIN_ADDRESS_ACCOUNTS` different
  accounts from one address (password spraying) lock that address for every account.

An address from which an account has logged in before (a known device, remembered 30 days)
is never refused by the second and third: only its own pair count can lock it. A try during a
lockout is not counted, so it never extends the lockout.
"""

from __future__ import annotations

import math
from datetime import timedelta

from axes.backends import AxesStandaloneBackend
from axes.exceptions import AxesBackendPermissionDenied
from axes.helpers import get_client_cache_keys, get_client_ip_address
from django.conf import settings
from django.core.cache import cache
from django.shortcuts import render
from django.utils import timezone

from apps.core.cache import redis_client

KNOWN_DEVICE_SECONDS = 30 * 86400
# "N attempts left" shows from this many on.
WARN_FROM = 3


def cooloff_seconds() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds())


def _key(kind: str, value: str) -> str:
    return cache.make_key(f"login:{kind}:{value}")


def _address(request) -> str:
    return getattr(request, "axes_ip_address", None) or get_client_ip_address(request) or ""


def _is_known_device(client, username: str, address: str) -> bool:
    return bool(client.sismember(_key("known", username), address))


def _pair_failures_and_ttl(client, request, username: str) -> tuple[int, int]:
    (axes_key,) = get_client_cache_keys(request, {"username": username})
    raw = cache.make_key(axes_key)
    count, ttl = client.pipeline().get(raw).ttl(raw).execute()
    return (int(count) if count is not None else 0), int(ttl)


def lockout_wait(request, username: str) -> int:
    """Seconds before `username` may try again from this request's address; 0 if now."""
    client = redis_client()
    address = _address(request)
    waits = []
    failures, ttl = _pair_failures_and_ttl(client, request, username)
    if failures >= settings.AXES_FAILURE_LIMIT:
        waits.append(ttl)
    if not _is_known_device(client, username, address):
        waits.append(client.ttl(_key("account-locked", username)))
        waits.append(client.ttl(_key("address-locked", address)))
    return max([0, *waits])


def attempts_left(request, username: str) -> int:
    """Failures `username` may still make from this address before it is locked out."""
    client = redis_client()
    pair, _ = _pair_failures_and_ttl(client, request, username)
    left = settings.AXES_FAILURE_LIMIT - pair
    if not _is_known_device(client, username, _address(request)):
        account = int(client.get(_key("account", username)) or 0)
        left = min(left, settings.THALAMUS_LOGIN_ACCOUNT_ATTEMPTS - account)
    return max(left, 0)


def login_failure_record(*, request, username: str) -> bool:
    """Count a failed login for the account and the address (axes counts the pair); True if
    the account or the address is locked out now.

    Each count's window starts with its first failure and is not moved by later ones.
    """
    address = _address(request)
    client = redis_client()
    account, address_accounts = _key("account", username), _key("address", address)
    pipe = client.pipeline()
    pipe.set(account, 0, ex=cooloff_seconds(), nx=True).incr(account)
    pipe.sadd(address_accounts, username).scard(address_accounts).ttl(address_accounts)
    _, failures, _, accounts, ttl = pipe.execute()
    pipe = client.pipeline()
    if ttl < 0:
        pipe.expire(address_accounts, cooloff_seconds())
    account_locked = failures >= settings.THALAMUS_LOGIN_ACCOUNT_ATTEMPTS
    address_locked = accounts >= settings.THALAMUS_LOGIN_ADDRESS_ACCOUNTS
    # nx: a lockout already running keeps its end.
    if account_locked:
        pipe.set(_key("account-locked", username), 1, ex=cooloff_seconds(), nx=True)
    if address_locked:
        pipe.set(_key("address-locked", address), 1, ex=cooloff_seconds(), nx=True)
    pipe.execute()
    return account_locked or address_locked


def login_success_record(*, request, username: str) -> None:
    """The address becomes a known device of the account."""
    known = _key("known", username)
    redis_client().pipeline().sadd(known, _address(request)).expire(
        known, KNOWN_DEVICE_SECONDS
    ).execute()


def on_login_failed(sender, credentials, request=None, **kwargs) -> None:
    # A try refused without looking at the password is not a failure: counting it would
    # extend the lockout that refused it.
    if request is None or getattr(request, "login_refused", False):
        return
    username = credentials.get("username")
    if username and login_failure_record(request=request, username=username):
        # The failure that reaches a limit is answered with the lockout (axes' middleware).
        request.axes_locked_out = True


def on_logged_in(sender, request, user, **kwargs) -> None:
    if request is not None:
        login_success_record(request=request, username=user.get_username())


class LoginLockoutBackend(AxesStandaloneBackend):
    """Axes' check of the pair, then the account's and the address's lockouts."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        try:
            super().authenticate(request, username=username, password=password, **kwargs)
        except AxesBackendPermissionDenied:
            request.login_refused = True
            raise
        if request is not None and username and lockout_wait(request, username):
            request.login_refused = True
            # Axes' middleware answers with login_locked_out, and axes counts nothing.
            request.axes_locked_out = True
            raise AxesBackendPermissionDenied("Account or address locked out")


def lockout_sentence(seconds: int) -> str:
    ends = timezone.localtime() + timedelta(seconds=seconds)
    minutes = math.ceil(seconds / 60)
    wait = f"{minutes} minute{'' if minutes == 1 else 's'}"
    return (
        "Too many failed logins from here. "
        f"You can try again at {ends:%H:%M} {ends.tzname()} (in {wait}); "
        "trying before then does not make the wait longer."
    )


def login_locked_out(request, response=None, credentials=None):
    """AXES_LOCKOUT_CALLABLE, for the site's login and the admin's alike."""
    username = (getattr(request, "axes_credentials", None) or {}).get("username") or (
        request.POST.get("username", "")
    )
    seconds = lockout_wait(request, username) if username else 0
    seconds = seconds or cooloff_seconds()
    locked = render(
        request,
        "accounts/locked_out.html",
        {"sentence": lockout_sentence(seconds)},
        status=429,
    )
    locked["Retry-After"] = str(seconds)
    return locked
