"""Failed logins lock an account from one address, an account from everywhere after many
more, and an address that tries many accounts; never one user's typos for everyone."""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.core.cache import cache

from apps.core.cache import redis_client

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery-9"
LIMIT = settings.AXES_FAILURE_LIMIT
COOLOFF = int(settings.AXES_COOLOFF_TIME.total_seconds())
HOME = "198.51.100.7"


@pytest.fixture(autouse=True)
def forget_failures():
    """The counters live in Redis, which outlives each test's database."""
    yield
    client = redis_client()
    for pattern in ("axes-*", "login:*"):
        for key in client.scan_iter(match=cache.make_key(pattern)):
            client.delete(key)


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password=PASSWORD)


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_user("admin", password=PASSWORD, is_staff=True)


def _log_in(client, username: str, password: str, address: str = HOME, path="/accounts/login/"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


def _fail(client, username: str, times: int, address: str = HOME, path="/accounts/login/"):
    return [_log_in(client, username, "wrong", address, path).status_code for _ in range(times)]


def _retry_after(response) -> int:
    return int(response["Retry-After"])


def test_bobs_typos_never_lock_out_the_admin_behind_the_same_address(client, bob, admin_user):
    assert _fail(client, "bob", LIMIT) == [200] * (LIMIT - 1) + [429]

    assert _log_in(client, "admin", PASSWORD).status_code == 302


def test_bob_is_locked_out_after_the_limit_even_with_his_right_password(client, bob):
    _fail(client, "bob", LIMIT)

    locked = _log_in(client, "bob", PASSWORD)

    assert locked.status_code == 429
    assert 0 < _retry_after(locked) <= COOLOFF
    assert b"You can try again at" in locked.content
    assert b"in 15 minutes" in locked.content
    assert "_auth_user_id" not in client.session
    # Nothing of it is in the database: the counts are Redis keys that expire by themselves.
    assert not AccessAttempt.objects.exists()
    # The same account from another address is not locked by this address's failures.
    assert _log_in(client, "bob", PASSWORD, address="203.0.113.5").status_code == 302


def test_a_try_during_a_lockout_does_not_make_it_longer(client, bob):
    _fail(client, "bob", LIMIT)
    (pair_key,) = [k for k in redis_client().scan_iter(match=cache.make_key("axes-*"))]
    # As if ten minutes of the lockout had passed.
    redis_client().expire(pair_key, 300)

    retried = _log_in(client, "bob", "wrong")

    assert retried.status_code == 429
    assert _retry_after(retried) <= 300
    assert 0 < redis_client().ttl(pair_key) <= 300
    assert b"in 5 minutes" in retried.content


def test_the_login_warns_when_few_attempts_are_left(client, bob):
    _fail(client, "bob", LIMIT - 5)
    quiet = _log_in(client, "bob", "wrong")
    assert b"attempts left" not in quiet.content

    warned = _log_in(client, "bob", "wrong")

    assert warned.status_code == 200
    assert b"3 attempts left" in warned.content
    _fail(client, "bob", 1)
    assert b"1 attempt left" in _log_in(client, "bob", "wrong").content


def test_the_admin_login_warns_and_locks_the_same_way(client, admin_user):
    statuses = _fail(client, "admin", LIMIT - 2, path="/admin/login/")
    assert statuses == [200] * (LIMIT - 2)
    assert b"1 attempt left" in _log_in(client, "admin", "wrong", path="/admin/login/").content
    assert _fail(client, "admin", 1, path="/admin/login/") == [429]

    locked = _log_in(client, "admin", PASSWORD, path="/admin/login/")

    assert locked.status_code == 429


def test_an_address_spraying_many_accounts_is_locked_for_every_account(client, bob):
    ceiling = settings.THALAMUS_LOGIN_ADDRESS_ACCOUNTS
    sprayer = "192.0.2.66"
    statuses = [_log_in(client, f"user-{n}", "Summer2026!", sprayer).status_code for n in range(20)]

    # Each account once: no pair is near its limit, but the address is.
    assert statuses[: ceiling - 1] == [200] * (ceiling - 1)
    assert set(statuses[ceiling - 1 :]) == {429}
    assert _log_in(client, "bob", PASSWORD, sprayer).status_code == 429
    # Elsewhere, bob is not locked.
    assert _log_in(client, "bob", PASSWORD).status_code == 302


def test_an_account_that_logged_in_from_an_address_before_is_let_in_there(client, bob):
    shared = "192.0.2.80"
    assert _log_in(client, "bob", PASSWORD, shared).status_code == 302
    client.post("/accounts/logout/")
    for n in range(settings.THALAMUS_LOGIN_ADDRESS_ACCOUNTS):
        _log_in(client, f"user-{n}", "wrong", shared)

    assert _log_in(client, "bob", PASSWORD, shared).status_code == 302


def test_an_account_guessed_from_many_addresses_is_locked_for_new_devices_only(client, bob):
    _log_in(client, "bob", PASSWORD, HOME)
    client.post("/accounts/logout/")
    attempts = settings.THALAMUS_LOGIN_ACCOUNT_ATTEMPTS
    statuses = [
        _log_in(client, "bob", "wrong", f"10.0.{n // 200}.{n % 200 + 1}").status_code
        for n in range(attempts)
    ]

    assert statuses == [200] * (attempts - 1) + [429]
    assert _log_in(client, "bob", PASSWORD, "203.0.113.9").status_code == 429
    assert _log_in(client, "bob", PASSWORD, HOME).status_code == 302


def test_a_successful_login_forgets_the_pairs_earlier_failures(client, bob):
    _fail(client, "bob", LIMIT - 1)
    assert _log_in(client, "bob", PASSWORD).status_code == 302
    client.post("/accounts/logout/")

    assert _fail(client, "bob", LIMIT - 1) == [200] * (LIMIT - 1)
    assert _log_in(client, "bob", PASSWORD).status_code == 302
