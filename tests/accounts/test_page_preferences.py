"""The page theme and the browser's time zone, kept per user (issue #28, item 2)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.urls import reverse

from apps.accounts.models import UserSettings
from apps.accounts.selectors import user_settings_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def _detect(client, zone: str):
    return client.post(reverse("time_zone_detect"), {"time_zone": zone})


def test_a_user_who_never_chose_a_zone_has_the_page_ask_the_browser(signed_in):
    page = signed_in.get(reverse("settings")).content.decode()

    assert f'data-time-zone-url="{reverse("time_zone_detect")}"' in page
    assert '<html lang="en" data-theme="system">' in page


def test_the_browsers_zone_is_taken_on_the_first_page_and_the_page_stops_asking(signed_in, user):
    assert _detect(signed_in, "America/Sao_Paulo").status_code == 204

    found = user_settings_for(user=user)
    assert found.time_zone == "America/Sao_Paulo" and found.time_zone_chosen
    assert "data-time-zone-url" not in signed_in.get(reverse("settings")).content.decode()


def test_a_later_browser_zone_does_not_replace_the_first(signed_in, user):
    _detect(signed_in, "Europe/Rome")
    _detect(signed_in, "Asia/Tokyo")

    assert user_settings_for(user=user).time_zone == "Europe/Rome"


def test_a_zone_chosen_on_the_settings_page_is_kept_over_the_browsers(signed_in, user):
    signed_in.post(reverse("user_settings_save", args=["time"]), {"time-time_zone": "UTC"})

    assert _detect(signed_in, "Asia/Tokyo").status_code == 204
    found = user_settings_for(user=user)
    assert found.time_zone == "UTC" and found.time_zone_chosen


@pytest.mark.parametrize("zone", ["Mars/Olympus", "", "../../etc/passwd", "localtime"])
def test_a_zone_zoneinfo_does_not_know_is_refused(signed_in, user, zone):
    assert _detect(signed_in, zone).status_code == 400

    found = user_settings_for(user=user)
    assert found.time_zone == settings.TIME_ZONE and not found.time_zone_chosen


def test_the_browsers_zone_is_the_senders_own(client, user, other_user):
    client.force_login(other_user)
    _detect(client, "Asia/Tokyo")

    assert not UserSettings.objects.filter(user=user).exists()
    assert user_settings_for(user=other_user).time_zone == "Asia/Tokyo"


def test_the_theme_is_saved_and_rendered_on_html_from_the_first_byte(signed_in, user):
    response = signed_in.post(reverse("theme_save"), {"theme": "dark", "next": "/settings/"})

    assert response.status_code == 302 and response.url == "/settings/"
    assert user_settings_for(user=user).theme == "dark"
    page = signed_in.get(reverse("home")).content.decode()
    assert '<html lang="en" data-theme="dark">' in page
    assert '<option value="dark" selected>' in page


def test_the_themes_script_gets_no_redirect_and_a_foreign_next_is_not_followed(signed_in, user):
    fetched = signed_in.post(
        reverse("theme_save"), {"theme": "light"}, headers={"X-Requested-With": "fetch"}
    )
    plain = signed_in.post(reverse("theme_save"), {"theme": "light", "next": "https://evil.test/"})

    assert fetched.status_code == 204
    assert plain.url == reverse("home")
    assert user_settings_for(user=user).theme == "light"


def test_an_unknown_theme_is_refused(signed_in, user):
    assert signed_in.post(reverse("theme_save"), {"theme": "sepia"}).status_code == 400
    assert user_settings_for(user=user).theme == "system"


def test_a_users_theme_is_theirs_alone(client, user, other_user):
    client.force_login(other_user)
    client.post(reverse("theme_save"), {"theme": "dark"})
    client.force_login(user)

    assert '<html lang="en" data-theme="system">' in client.get(reverse("home")).content.decode()
