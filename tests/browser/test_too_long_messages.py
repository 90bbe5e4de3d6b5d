"""The composer counts the room the model leaves a message, refuses one past it, and a turn
that failed as too long goes back into it to be edited; the error pages, in the layout."""

from __future__ import annotations

import math

import pytest
from playwright.sync_api import expect

from apps.chat import open_replies, services
from apps.chat.models import Conversation, Message
from apps.cognition.message_room import message_room
from tests.browser.test_chat_layout import PHONE, VIEWPORTS, WIDE, _shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def small_window(config):
    config(context_tokens=1024, answer_max_tokens=256, turns_per_minute=0)


def _name(viewport) -> str:
    return "wide" if viewport is WIDE else "phone"


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_composer_counts_down_the_room_and_refuses_a_message_past_it(
    page, asgi_server, log_in, user, small_window, viewport
):
    conversation = Conversation.objects.create(owner=user, title="A long paste")
    room = message_room(user=user, conversation=conversation)
    page.set_viewport_size(viewport)
    log_in("alice")
    page.goto(f"{asgi_server}/c/{conversation.pk}/")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    counter = page.locator("#composer-room")
    total = math.floor(room.tokens * room.chars_per_token)
    assert counter.inner_text() == f"Room for about {total:,} characters."

    page.fill("#composer textarea", "x" * 320)
    assert counter.inner_text() == f"About {total - 320:,} of {total:,} characters left."
    assert page.locator("#composer button[type=submit]").is_enabled()

    too_long = int(room.chars_per_token * (room.tokens + 50))
    page.fill("#composer textarea", "x" * too_long)
    assert counter.inner_text() == (
        f"Your message is about {too_long - total:,} characters too long for this model."
        " Shorten it to send it."
    )
    assert page.locator("#composer button[type=submit]").is_disabled()
    _shoot(page, f"too-long-{_name(viewport)}")
    page.keyboard.press("Enter")
    page.wait_for_timeout(300)
    assert not Message.objects.exists()

    page.fill("#composer textarea", "short again")
    assert page.locator("#composer button[type=submit]").is_enabled()


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_a_turn_that_failed_as_too_long_is_edited_in_the_composer(
    page, asgi_server, log_in, user, small_window, viewport
):
    conversation = Conversation.objects.create(owner=user, title="A long paste")
    text = "A very long paste. " * 300
    # Saved before the window shrank: its answer failed as too long.
    sent = services.message_send(conversation=conversation, content=text)
    open_replies.message_fail_open(
        reply_id=sent.reply.pk,
        error="Your message is too long for the model.",
        trace={"too_long": {"needed": 1500, "budget": 700}},
    )
    page.set_viewport_size(viewport)
    log_in("alice")
    page.goto(f"{asgi_server}/c/{conversation.pk}/")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    assert page.locator(".retry-form").count() == 0
    _shoot(page, f"too-long-failed-{_name(viewport)}")

    page.click("text=Edit the message")
    page.wait_for_selector(".msg", state="detached")
    # The turn leaves the page in one frame, the composer with its text comes in the next.
    # Locator waits: wait_for_function polls with eval, which the page's CSP refuses, so it
    # failed whenever the composer was not filled at its first look.
    expect(page.locator("#composer textarea")).not_to_have_value("")
    expect(page.locator("#composer-room")).to_contain_text("Your message is about")
    assert page.locator("#composer textarea").input_value() == text.strip()
    assert page.locator("#composer button[type=submit]").is_disabled()
    assert "Your message is about" in page.locator("#composer-room").inner_text()
    assert not Message.objects.exists()
    _shoot(page, f"too-long-edit-{_name(viewport)}")


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_a_missing_conversation_is_a_404_in_the_layout_with_a_way_back(
    page, asgi_server, log_in, user, viewport
):
    page.set_viewport_size(viewport)
    log_in("alice")
    response = page.goto(f"{asgi_server}/c/987654/")
    assert response.status == 404
    assert page.locator("header.topbar").is_visible()
    page.emulate_media(color_scheme="dark")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background != "rgb(255, 255, 255)"
    _shoot(page, f"error-404-{_name(viewport)}")
    page.click("text=Back to your conversations")
    page.wait_for_url(f"{asgi_server}/")


def test_the_500_page_looks_finished(page, asgi_server):
    """Rendered as Django's server_error renders it: no request, no context."""
    from django.template import loader

    html = loader.get_template("500.html").render()
    page.set_viewport_size(PHONE)
    page.route(f"{asgi_server}/boom", lambda route: route.fulfill(status=500, body=html))
    page.goto(f"{asgi_server}/boom")
    assert page.locator(".error-page h1").inner_text() == "Something went wrong"
    for viewport in (WIDE, PHONE):
        page.set_viewport_size(viewport)
        _shoot(page, f"error-500-{_name(viewport)}")
