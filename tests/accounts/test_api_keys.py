from __future__ import annotations

import hashlib
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.accounts.models import ApiKey
from apps.accounts.selectors import api_key_for_token
from apps.accounts.services import api_key_create, api_key_revoke

pytestmark = pytest.mark.django_db

SECRET_RE = re.compile(r"thk_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}")


def test_a_new_key_stores_only_the_hash_of_its_secret(user):
    key, secret = api_key_create(user=user, name="laptop")
    assert SECRET_RE.fullmatch(secret)
    assert secret.startswith(f"thk_{key.prefix}_")
    assert key.hashed_key == hashlib.sha256(secret.encode()).hexdigest()
    stored = ApiKey.objects.filter(pk=key.pk).values().get()
    assert secret not in str(stored)


def test_a_token_authenticates_until_its_key_is_revoked(user):
    key, secret = api_key_create(user=user, name="laptop")
    assert api_key_for_token(token=secret) == key
    api_key_revoke(key=key)
    assert key.revoked_at is not None
    assert api_key_for_token(token=secret) is None


@pytest.mark.parametrize(
    "mangle",
    [
        lambda s: s[:-1] + ("A" if s[-1] != "A" else "B"),
        lambda s: s.replace("thk_", "sk_"),
        lambda s: "thk_" + s.split("_")[1],
        lambda s: "",
        lambda s: "thk_deadbeef_" + s.split("_", 2)[2],
    ],
)
def test_a_wrong_token_does_not_authenticate(user, mangle):
    _, secret = api_key_create(user=user, name="laptop")
    assert api_key_for_token(token=mangle(secret)) is None


def test_a_deactivated_users_key_does_not_authenticate(user):
    _, secret = api_key_create(user=user, name="laptop")
    user.is_active = False
    user.save()
    assert api_key_for_token(token=secret) is None


def test_the_settings_page_needs_a_login(client):
    response = client.get("/accounts/settings/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_user_creates_a_key_on_the_settings_page_and_sees_the_secret_once(client, user):
    client.force_login(user)
    response = client.post("/accounts/settings/keys/", {"name": "Open WebUI"}, follow=True)
    assert response.redirect_chain == [("/accounts/settings/", 302)]
    secret = SECRET_RE.search(response.content.decode()).group(0)
    key = ApiKey.objects.get(user=user)
    assert key.name == "Open WebUI" and api_key_for_token(token=secret) == key
    assert b"will not be shown again" in response.content

    listing = client.get("/accounts/settings/").content.decode()
    assert "Open WebUI" in listing and f"thk_{key.prefix}_" in listing
    assert secret not in listing


def test_a_key_needs_a_name(client, user):
    client.force_login(user)
    response = client.post("/accounts/settings/keys/", {"name": ""})
    assert response.status_code == 200 and b"This field is required" in response.content
    assert not ApiKey.objects.exists()


def test_the_settings_page_lists_only_the_users_own_keys(client, user, other_user):
    api_key_create(user=user, name="mine")
    api_key_create(user=other_user, name="theirs")
    client.force_login(user)
    page = client.get("/accounts/settings/").content.decode()
    assert "mine" in page and "theirs" not in page


def test_a_user_revokes_a_key_without_javascript(client, user):
    key, secret = api_key_create(user=user, name="laptop")
    client.force_login(user)
    response = client.post(f"/accounts/settings/keys/{key.pk}/revoke/")
    assert response.status_code == 302 and response["Location"] == "/accounts/settings/"
    assert api_key_for_token(token=secret) is None
    assert b"revoked" in client.get("/accounts/settings/").content


def test_revoking_with_htmx_returns_the_updated_row(client, user):
    key, _ = api_key_create(user=user, name="laptop")
    client.force_login(user)
    response = client.post(f"/accounts/settings/keys/{key.pk}/revoke/", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and body.strip().startswith(f'<tr id="api-key-{key.pk}"')
    assert "revoked" in body and "<form" not in body


def test_a_user_cannot_revoke_another_users_key(client, user, other_user):
    key, secret = api_key_create(user=other_user, name="theirs")
    client.force_login(user)
    assert client.post(f"/accounts/settings/keys/{key.pk}/revoke/").status_code == 404
    assert api_key_for_token(token=secret) == key


def test_revoking_needs_a_post(client, user):
    key, _ = api_key_create(user=user, name="laptop")
    client.force_login(user)
    assert client.get(f"/accounts/settings/keys/{key.pk}/revoke/").status_code == 405


def test_the_command_prints_a_working_key(user):
    out, err = StringIO(), StringIO()
    call_command("create_api_key", "alice", "--name", "script", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    assert SECRET_RE.fullmatch(secret)
    key = api_key_for_token(token=secret)
    assert key.user == user and key.name == "script"
    assert "will not be shown again" in err.getvalue()


def test_the_command_refuses_an_unknown_user(db):
    with pytest.raises(CommandError, match='No user named "nobody"'):
        call_command("create_api_key", "nobody", stdout=StringIO())
    assert not ApiKey.objects.exists()


def test_the_admin_lists_keys_and_revokes_them_with_an_action(admin_client, user):
    key, secret = api_key_create(user=user, name="laptop")
    listing = admin_client.get("/admin/accounts/apikey/")
    assert listing.status_code == 200
    assert b"laptop" in listing.content and key.prefix.encode() in listing.content
    assert secret.encode() not in listing.content
    assert admin_client.get("/admin/accounts/apikey/?revoked_at__isnull=True").status_code == 200

    admin_client.post(
        "/admin/accounts/apikey/",
        {"action": "revoke", "_selected_action": [key.pk]},
    )
    assert api_key_for_token(token=secret) is None


def test_the_admin_adds_a_key_through_the_service_and_shows_the_secret_once(admin_client, user):
    assert admin_client.get("/admin/accounts/apikey/add/").status_code == 200
    response = admin_client.post(
        "/admin/accounts/apikey/add/", {"user": user.pk, "name": "from admin"}, follow=True
    )
    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    secret = next(SECRET_RE.search(m).group(0) for m in shown if SECRET_RE.search(m))
    key = ApiKey.objects.get(name="from admin")
    assert api_key_for_token(token=secret) == key
    assert admin_client.get(f"/admin/accounts/apikey/{key.pk}/change/").status_code == 200


def test_a_key_comes_with_its_user_and_the_users_settings_as_saved(user, other_user):
    """One statement loads the key, its user and their settings, each as the ORM would: the
    settings' JSON decoded, the defaults (unsaved) for a user who never changed them."""
    from apps.accounts.services import user_settings_update

    user_settings_update(user=user, learn_categories=["name", "job"], about_me="Nurse.")
    _, secret = api_key_create(user=user, name="saved")
    _, other_secret = api_key_create(user=other_user, name="defaults")

    key = api_key_for_token(token=secret)
    assert key.user == user and key.user.username == user.username
    assert key.user.thalamus_settings.learn_categories == ["name", "job"]
    assert key.user.thalamus_settings.about_me == "Nurse."
    defaults = api_key_for_token(token=other_secret).user.thalamus_settings
    assert defaults.pk is None and defaults.user_id == other_user.pk and defaults.memory_enabled
    assert api_key_for_token(token=secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
