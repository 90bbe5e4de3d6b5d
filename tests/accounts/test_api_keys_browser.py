from __future__ import annotations

import pytest

from apps.accounts.models import ApiKey
from apps.accounts.selectors import api_key_for_token

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_user_creates_a_key_copies_it_once_and_revokes_it(page, asgi_server, log_in, user):
    log_in("alice")
    page.click("nav >> text=Settings")
    page.wait_for_url("**/accounts/settings/")
    assert page.locator("#api-keys-empty").is_visible()

    page.fill("#id_name", "Open WebUI")
    page.click("#api-key-form button[type=submit]")
    secret = page.locator("#new-api-key-secret").input_value()
    key = ApiKey.objects.get(user=user)
    assert api_key_for_token(token=secret) == key
    row = page.locator(f"#api-key-{key.pk}")
    assert "Open WebUI" in row.inner_text() and f"thk_{key.prefix}_" in row.inner_text()

    page.reload()
    assert page.locator("#new-api-key-secret").count() == 0

    page.once("dialog", lambda dialog: dialog.accept())
    row.locator("button", has_text="Revoke").click()
    row.locator(".badge", has_text="revoked").wait_for()
    assert page.url.endswith("/accounts/settings/")
    assert api_key_for_token(token=secret) is None
