from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_pages_require_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/")


def test_login_page_is_public_and_has_a_strict_csp(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert "unsafe-eval" not in csp and "script-src 'self' 'unsafe-inline'" not in csp
    assert b"<script>" not in response.content


def test_a_user_logs_in_and_out(client, user):
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "correct-horse-battery-9"}
    )
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    client.post("/accounts/logout/")
    assert client.get("/").status_code == 302


def test_a_wrong_password_shows_an_error(client, user):
    response = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content


def test_signup_is_closed_by_default(client):
    assert client.get("/accounts/signup/").status_code == 404


def test_open_signup_applies_password_validators(client, settings, django_user_model):
    settings.THALAMUS_OPEN_SIGNUP = True
    weak = client.post(
        "/accounts/signup/", {"username": "bob", "password1": "123", "password2": "123"}
    )
    assert weak.status_code == 200 and not django_user_model.objects.filter(username="bob")
    good = client.post(
        "/accounts/signup/",
        {"username": "bob", "password1": "violet-Mango-42x", "password2": "violet-Mango-42x"},
    )
    assert good.status_code == 302
    assert django_user_model.objects.filter(username="bob").exists()
