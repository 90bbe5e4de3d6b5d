from __future__ import annotations

import os

import pytest

from apps.accounts.models import UserSettings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set to a directory to keep the page's screenshots in light and dark.
SHOTS = os.environ.get("THALAMUS_SCREENSHOTS", "")


def test_a_settings_section_saves_in_place_in_light_and_dark(page, log_in, asgi_server, user):
    errors = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    log_in("alice")

    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.goto(f"{asgi_server}/accounts/settings/")
        page.wait_for_load_state("domcontentloaded")
        if SHOTS:
            page.screenshot(path=f"{SHOTS}/settings-{scheme}.png", full_page=True)
        assert page.evaluate("window.scrollY") == 0, "opens at the top, no field grabs focus"
        section = page.locator("#settings-memory")
        assert section.evaluate("e => getComputedStyle(e).backgroundColor") != (
            page.evaluate("getComputedStyle(document.body).backgroundColor")
        ), "each section stands out as a card"

    page.uncheck("#id_memory-memory_enabled")
    page.uncheck("input[name='memory-learn_categories'][value='health']")
    url = page.url
    page.click("#settings-memory-form button[type=submit]")
    page.wait_for_selector("#settings-memory-form .saved-note")

    assert page.url == url, "saved in place, without a page load"
    saved = UserSettings.objects.get(user=user)
    assert saved.memory_enabled is False and "health" not in saved.learn_categories
    assert not page.is_checked("#id_memory-memory_enabled")
    assert errors == []


def test_a_temporary_chat_is_started_from_the_sidebar_and_says_so(page, log_in, asgi_server, user):
    log_in("alice")
    page.goto(f"{asgi_server}/")

    page.click(".new-conversation button[name=temporary]")
    page.wait_for_selector("#temporary-notice")

    assert "Nothing here is remembered" in page.inner_text("#temporary-notice")
    assert page.locator(".conv-list .badge-temporary").count() == 1
    if SHOTS:
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            page.screenshot(path=f"{SHOTS}/temporary-{scheme}.png")
