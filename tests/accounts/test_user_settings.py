"""The settings page: memory, custom instructions, time zone, password; each user changes only
their own (issue #15, item 3)."""

from __future__ import annotations

import json
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import LEARNABLE_CATEGORIES, UserSettings
from apps.accounts.selectors import user_settings_for
from apps.chat.models import Conversation
from apps.memory.models import Category

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery-9"


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def _save(client, section: str, data: dict, **headers):
    prefixed = {f"{section}-{name}": value for name, value in data.items()}
    return client.post(reverse("user_settings_save", args=[section]), prefixed, **headers)


def test_the_learnable_categories_are_the_memorys_categories():
    assert list(LEARNABLE_CATEGORIES) == list(Category.choices)


def test_a_user_who_never_saved_settings_has_the_defaults(user):
    found = user_settings_for(user=user)

    assert found.pk is None and found.memory_enabled
    assert found.learn_categories == [value for value, _ in Category.choices]
    assert found.time_zone == settings.TIME_ZONE
    assert found.knowledge_language == "" and found.about_me == "" and found.answer_style == ""


def test_the_settings_page_shows_every_section(signed_in):
    page = signed_in.get(reverse("settings")).content.decode()

    for section in ("memory", "instructions", "time", "password", "api-keys"):
        assert f'id="settings-{section}"' in page
    assert 'name="memory-memory_enabled"' in page and "checked" in page
    assert 'value="health"' in page
    assert 'name="instructions-about_me"' in page
    assert '<option value="Europe/Rome">' in page
    assert 'name="old_password"' in page


def test_memory_settings_are_saved(signed_in, user):
    response = _save(
        signed_in,
        "memory",
        {"learn_categories": ["identity", "work"], "knowledge_language": "it"},
    )

    assert response.status_code == 302
    assert response.url == reverse("settings") + "#settings-memory"
    saved = UserSettings.objects.get(user=user)
    assert saved.memory_enabled is False, "an unticked box turns memory off"
    assert saved.learn_categories == ["identity", "work"]
    assert saved.knowledge_language == "it"
    assert "Settings saved." in signed_in.get(response.url).content.decode()


def test_with_htmx_a_section_comes_back_on_its_own(signed_in, user):
    response = _save(
        signed_in,
        "instructions",
        {"about_me": "I am a nurse.", "answer_style": "Briefly."},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith("<form") and 'id="settings-instructions-form"' in body
    assert "Saved." in body and "I am a nurse." in body
    saved = UserSettings.objects.get(user=user)
    assert (saved.about_me, saved.answer_style) == ("I am a nurse.", "Briefly.")


def test_an_unknown_time_zone_is_refused_and_nothing_is_saved(signed_in, user):
    response = _save(signed_in, "time", {"time_zone": "Mars/Olympus"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 400
    assert "errorlist" in response.content.decode()
    assert not UserSettings.objects.filter(user=user).exists()

    response = _save(signed_in, "time", {"time_zone": "Mars/Olympus"})
    assert response.status_code == 400 and 'id="settings-time"' in response.content.decode()


def test_an_unknown_section_is_not_found(signed_in):
    assert _save(signed_in, "secrets", {"x": "y"}).status_code == 404


def test_dates_on_the_pages_are_shown_in_the_users_time_zone(signed_in, user):
    conversation = Conversation.objects.create(owner=user, temporary=True)
    _save(signed_in, "time", {"time_zone": "Asia/Tokyo"})
    assert UserSettings.objects.get(user=user).time_zone == "Asia/Tokyo"

    page = signed_in.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()

    expires = conversation.expires_at.astimezone(ZoneInfo("Asia/Tokyo"))
    assert f"{expires:%H:%M} JST" in page
    assert timezone.get_current_timezone_name() == settings.TIME_ZONE, "deactivated after"


def test_a_password_change_keeps_the_session_and_the_new_password_works(client, user):
    client.force_login(user)

    response = client.post(
        reverse("settings_password"),
        {
            "old_password": PASSWORD,
            "new_password1": "a-new-long-passphrase-42",
            "new_password2": "a-new-long-passphrase-42",
        },
    )

    assert response.status_code == 302 and response.url == reverse("settings")
    page = client.get(reverse("settings"))
    assert page.status_code == 200, "still signed in"
    assert "Password changed." in page.content.decode()
    user.refresh_from_db()
    assert user.check_password("a-new-long-passphrase-42")


def test_a_wrong_old_password_changes_nothing(signed_in, user):
    response = signed_in.post(
        reverse("settings_password"),
        {
            "old_password": "not-it",
            "new_password1": "a-new-long-passphrase-42",
            "new_password2": "a-new-long-passphrase-42",
        },
    )

    assert response.status_code == 400
    assert "errorlist" in response.content.decode()
    assert 'id="settings-memory"' in response.content.decode(), "on the settings page"
    user.refresh_from_db()
    assert user.check_password(PASSWORD)
    assert signed_in.get(reverse("settings_password")).status_code == 200


def test_a_user_changes_only_their_own_settings(client, user, other_user):
    client.force_login(other_user)

    _save(client, "memory", {"learn_categories": ["identity"]})
    _save(client, "instructions", {"about_me": "I am Mallory.", "answer_style": ""})
    _save(client, "time", {"time_zone": "Asia/Tokyo"})

    assert not UserSettings.objects.filter(user=user).exists()
    alice = user_settings_for(user=user)
    assert alice.memory_enabled and alice.about_me == "" and alice.time_zone == settings.TIME_ZONE
    mallory = UserSettings.objects.get(user=other_user)
    assert mallory.about_me == "I am Mallory." and mallory.time_zone == "Asia/Tokyo"
    client.force_login(user)
    assert "I am Mallory." not in client.get(reverse("settings")).content.decode()


def test_the_settings_need_a_signed_in_user(client, user):
    response = _save(client, "memory", {"learn_categories": []})

    assert response.status_code == 302 and reverse("login") in response.url
    assert not UserSettings.objects.exists()
    response = client.post(reverse("settings_password"), {"old_password": PASSWORD})
    assert response.status_code == 302 and reverse("login") in response.url


@pytest.mark.django_db(transaction=True)
async def test_under_asgi_pages_take_the_users_zone_and_a_request_without_a_session_reads_nothing(
    user, django_assert_max_num_queries
):
    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import AnonymousUser
    from django.http import HttpResponse
    from django.test import AsyncRequestFactory
    from django.utils import timezone

    from apps.accounts.middleware import user_time_zone_middleware
    from apps.accounts.services import user_settings_update

    await sync_to_async(user_settings_update)(user=user, time_zone="Asia/Tokyo")
    seen = []

    async def view(request):
        seen.append(timezone.get_current_timezone_name())
        return HttpResponse()

    middleware = user_time_zone_middleware(view)

    def request_of(who):
        request = AsyncRequestFactory().get("/")

        async def auser():
            return who

        request.auser = auser
        return request

    await middleware(request_of(user))
    with django_assert_max_num_queries(0):
        await middleware(request_of(AnonymousUser()))

    assert seen == ["Asia/Tokyo", timezone.get_default_timezone_name()]


def test_an_admin_can_turn_a_users_memory_off_in_the_admin(admin_client, user):
    from apps.accounts.services import user_settings_update

    row = user_settings_update(user=user, about_me="I keep bees.")
    page = admin_client.get(f"/admin/accounts/usersettings/{row.pk}/change/")
    assert page.status_code == 200
    assert "I keep bees." in page.content.decode()
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    data.update({"memory_enabled": "", "learn_categories": json.dumps(row.learn_categories)})
    saved = admin_client.post(f"/admin/accounts/usersettings/{row.pk}/change/", data)
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert user_settings_for(user=user).memory_enabled is False
    listing = admin_client.get("/admin/accounts/usersettings/?memory_enabled__exact=0")
    assert user.username in listing.content.decode()
