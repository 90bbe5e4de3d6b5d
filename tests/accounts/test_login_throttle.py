"""Password guessing is throttled per account and per address, in Redis (django-axes)."""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt
from axes.utils import reset
from django.conf import settings

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery-9"
LIMIT = settings.AXES_FAILURE_LIMIT
ADDRESSES = [f"203.0.113.{n}" for n in range(1, LIMIT + 3)]


@pytest.fixture
def victim(django_user_model):
    return django_user_model.objects.create_user("throttle-victim", password=PASSWORD)


@pytest.fixture(autouse=True)
def forget_failures():
    """The counters live in Redis, which outlives each test's database."""
    yield
    for address in ADDRESSES + ["198.51.100.9"]:
        reset(ip=address)
    for name in ["throttle-victim", "throttle-staff"] + [f"guess-{n}" for n in range(LIMIT + 2)]:
        reset(username=name)


def _log_in(client, username: str, password: str, address: str, path="/accounts/login/"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_an_account_is_locked_after_the_limit_even_from_many_addresses(client, victim):
    for address in ADDRESSES[: LIMIT - 1]:
        assert _log_in(client, "throttle-victim", "wrong", address).status_code == 200
    # The failure that reaches the limit is answered with the lockout itself.
    assert _log_in(client, "throttle-victim", "wrong", ADDRESSES[LIMIT - 1]).status_code == 429

    locked = _log_in(client, "throttle-victim", PASSWORD, ADDRESSES[LIMIT])

    assert locked.status_code == 429
    assert locked["Retry-After"] == str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    assert b"Too many failed logins" in locked.content
    assert b"Try again in 15 minutes" in locked.content
    assert "_auth_user_id" not in client.session
    # Nothing of it is in the database: the counts are Redis keys that expire by themselves.
    assert not AccessAttempt.objects.exists()


def test_an_address_is_locked_after_the_limit_whatever_account_it_tries(client, victim):
    for n in range(LIMIT - 1):
        assert _log_in(client, f"guess-{n}", "wrong", "198.51.100.9").status_code == 200
    assert _log_in(client, f"guess-{LIMIT}", "wrong", "198.51.100.9").status_code == 429

    assert _log_in(client, "throttle-victim", PASSWORD, "198.51.100.9").status_code == 429
    # The account itself is not locked: its owner logs in from elsewhere.
    assert _log_in(client, "throttle-victim", PASSWORD, ADDRESSES[0]).status_code == 302


def test_the_admin_login_counts_and_locks_the_same_way(client, django_user_model):
    django_user_model.objects.create_user("throttle-staff", password=PASSWORD, is_staff=True)
    for address in ADDRESSES[: LIMIT - 1]:
        response = _log_in(client, "throttle-staff", "wrong", address, path="/admin/login/")
        assert response.status_code == 200
    _log_in(client, "throttle-staff", "wrong", ADDRESSES[LIMIT - 1], path="/admin/login/")

    locked = _log_in(client, "throttle-staff", PASSWORD, ADDRESSES[LIMIT], path="/admin/login/")

    assert locked.status_code == 429
    assert int(locked["Retry-After"]) > 0


def test_a_successful_login_forgets_the_accounts_earlier_failures(client, victim):
    for address in ADDRESSES[: LIMIT - 1]:
        _log_in(client, "throttle-victim", "wrong", address)
    assert _log_in(client, "throttle-victim", PASSWORD, ADDRESSES[0]).status_code == 302
    client.post("/accounts/logout/")

    for address in ADDRESSES[: LIMIT - 1]:
        assert _log_in(client, "throttle-victim", "wrong", address).status_code == 200
    assert _log_in(client, "throttle-victim", PASSWORD, ADDRESSES[0]).status_code == 302
