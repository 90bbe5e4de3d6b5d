"""The demo notice's dismissal: a cookie the page reads when it is drawn."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_dismissing_the_demo_notice_keeps_it_off_every_page(client, user, settings):
    settings.THALAMUS_DEMO = True
    client.force_login(user)
    assert 'id="demo-banner"' in client.get("/memory/").content.decode()

    response = client.post("/demo-banner/dismiss/", {"next": "/memory/"})

    assert response.status_code == 302 and response["Location"] == "/memory/"
    assert response.cookies["demo_banner_dismissed"]["max-age"] == 365 * 24 * 3600
    for path in ("/memory/", "/dashboard/", "/accounts/settings/"):
        assert 'id="demo-banner"' not in client.get(path).content.decode(), path


def test_the_dismissal_never_sends_the_browser_to_another_site(client, user, settings):
    settings.THALAMUS_DEMO = True
    client.force_login(user)

    response = client.post("/demo-banner/dismiss/", {"next": "https://evil.example/"})

    assert response["Location"] == "/"


def test_the_dismissal_is_a_post(client, user):
    client.force_login(user)

    assert client.get("/demo-banner/dismiss/").status_code == 405
