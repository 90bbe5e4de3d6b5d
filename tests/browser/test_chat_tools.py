"""The chat people expect (issue #28, items 2 and 3), in Chromium at 1400 and 390 px, light and
dark: sending scrolls to the new exchange, "Jump to latest" while scrolled up during an answer,
Copy and the time on every message, the keyboard shortcuts and their help, the theme switch,
the browser's time zone on first login, and the chat model picker."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.core.cache import cache
from playwright.sync_api import expect

from apps.accounts.selectors import user_settings_for
from apps.chat.models import Conversation, Message
from apps.core.llm.servers import models_key

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}
LOOKS = [
    pytest.param(viewport, scheme, id=f"{name}-{scheme}")
    for name, viewport in (("wide", WIDE), ("phone", PHONE))
    for scheme in ("light", "dark")
]
PASSWORD = "correct-horse-battery-9"
# The box of the element as drawn, clipped by the message list; null when scrolled away.
SHOWN_BOX = """selector => {
  const el = document.querySelector(selector);
  if (!el) return null;
  const r = el.getBoundingClientRect();
  const list = el.closest('#messages');
  if (list) {
    const l = list.getBoundingClientRect();
    if (Math.min(r.bottom, l.bottom) - Math.max(r.top, l.top) < 1) return null;
  }
  if (r.width < 1 || r.height < 1) return null;
  return {left: r.left, top: r.top, right: r.right, bottom: r.bottom};
}"""
BACKGROUND = "getComputedStyle(document.body).backgroundColor"
LIGHT_BG, DARK_BG = "rgb(246, 247, 249)", "rgb(17, 19, 24)"


@pytest.fixture
def browser_page(chromium, asgi_server):
    """A page of its own context, made by the test (permissions, time zone)."""
    contexts = []

    def open_page(viewport: dict, scheme: str, **options):
        context = chromium.new_context(viewport=viewport, color_scheme=scheme, **options)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.goto(f"{asgi_server}/accounts/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/accounts/login/" not in url)
        return page

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture
def served(llm_stub):
    before = list(llm_stub.models)

    def serve(*names: str) -> None:
        llm_stub.models[:] = names
        cache.delete(models_key(llm_stub.url))

    yield serve
    llm_stub.models[:] = before
    cache.delete(models_key(llm_stub.url))


def _long_conversation(user) -> Conversation:
    conversation = Conversation.objects.create(owner=user, title="Bees in winter")
    parent = None
    for i in range(10):
        question = Message.objects.create(
            conversation=conversation, role="user", content=f"Question {i}?", parent=parent
        )
        parent = Message.objects.create(
            conversation=conversation,
            role="assistant",
            content=f"Answer {i}. " + "Because. " * 60,
            parent=question,
        )
    return conversation


def _open(page, asgi_server, conversation) -> None:
    page.goto(f"{asgi_server}/c/{conversation.pk}/")
    page.wait_for_selector(".chat[data-live='on']", state="attached")


def _within_screen(box: dict, viewport: dict) -> None:
    assert box is not None, "not shown"
    assert box["left"] >= 0 and box["right"] <= viewport["width"] + 0.5, box
    assert box["top"] >= 0 and box["bottom"] <= viewport["height"] + 0.5, box


@pytest.mark.parametrize(("viewport", "scheme"), LOOKS)
def test_sending_shows_the_new_exchange_and_jump_to_latest_brings_you_down(
    browser_page, asgi_server, user, llm_stub, viewport, scheme
):
    conversation = _long_conversation(user)
    llm_stub.script({"content": "word " * 500, "tps": 25})
    page = browser_page(viewport, scheme)
    _open(page, asgi_server, conversation)
    page.evaluate("document.getElementById('messages').scrollTop = 0")

    page.fill("#composer textarea", "And in spring?")
    page.keyboard.press("Enter")
    page.locator(".msg-assistant.streaming .md-out", has_text="word word").wait_for()

    # Sent from the top of the list, the new exchange is what the list shows.
    asked = page.locator(".msg-user").last.get_attribute("id")
    _within_screen(page.evaluate(SHOWN_BOX, f"#{asked}"), viewport)
    assert page.locator("#jump-latest:visible").count() == 0

    page.evaluate("document.getElementById('messages').scrollTop = 0")
    page.wait_for_selector("#jump-latest:visible")
    jump = page.evaluate(SHOWN_BOX, "#jump-latest")
    _within_screen(jump, viewport)
    composer = page.evaluate(SHOWN_BOX, "#composer-box")
    assert jump["bottom"] <= composer["top"] + 0.5, "Jump to latest covers the composer"
    assert page.evaluate(SHOWN_BOX, ".msg-assistant.streaming") is None

    page.click("#jump-latest")
    assert page.evaluate(SHOWN_BOX, ".msg-assistant.streaming") is not None
    page.wait_for_selector("#jump-latest", state="hidden")

    # Esc stops the answer.
    page.keyboard.press("Escape")
    page.wait_for_selector(".msg-assistant.cancelled")
    assert Message.objects.filter(role="assistant", status="cancelled").count() == 1


@pytest.mark.parametrize(("viewport", "scheme"), LOOKS)
def test_every_message_has_copy_and_its_time_and_copy_fills_the_clipboard(
    browser_page, asgi_server, user, viewport, scheme
):
    conversation = Conversation.objects.create(owner=user, title="Code")
    question = Message.objects.create(
        conversation=conversation, role="user", content="How do I list files?"
    )
    answer = "Use **ls**:\n\n```sh\nls -la\n```"
    Message.objects.create(
        conversation=conversation, role="assistant", content=answer, parent=question
    )
    page = browser_page(viewport, scheme, permissions=["clipboard-read", "clipboard-write"])
    _open(page, asgi_server, conversation)

    assert page.locator(".msg").count() == 2
    assert page.locator(".msg [data-action='copy']").count() == 2
    assert page.locator(".msg time.msg-time[data-local]").count() == 2

    reply = page.locator(".msg-assistant")
    tools = reply.locator(".msg-tools")
    assert tools.evaluate("el => getComputedStyle(el).opacity") == "0"
    reply.hover()
    page.wait_for_function(
        "() => getComputedStyle(document.querySelector('.msg-assistant .msg-tools')).opacity"
        " === '1'"
    )
    shown = page.evaluate(SHOWN_BOX, ".msg-assistant .msg-tools")
    _within_screen(shown, viewport)
    body = page.evaluate(SHOWN_BOX, ".msg-assistant .msg-body")
    assert shown["bottom"] <= body["top"] + 0.5, "the tools cover the answer"
    stamp = reply.locator("time.msg-time")
    assert stamp.get_attribute("title") and stamp.inner_text().strip()

    reply.locator("[data-action='copy']").click()
    page.wait_for_selector(".msg-assistant [data-action='copy']:text('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == answer

    page.locator(".msg-user").hover()
    page.locator(".msg-user [data-action='copy']").click()
    page.wait_for_selector(".msg-user [data-action='copy']:text('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == "How do I list files?"


@pytest.mark.parametrize(("viewport", "scheme"), LOOKS)
def test_the_shortcuts_are_listed_in_the_help_and_each_works(
    browser_page, asgi_server, user, viewport, scheme
):
    conversation = _long_conversation(user)
    page = browser_page(viewport, scheme)
    _open(page, asgi_server, conversation)

    page.click(".shortcuts-button")
    page.wait_for_selector("#shortcuts-help:popover-open")
    assert page.locator("#shortcuts-help dt").count() == 6
    assert page.locator("#shortcuts-help kbd").count() >= 10
    help_box = page.evaluate(SHOWN_BOX, "#shortcuts-help")
    _within_screen(help_box, viewport)
    assert page.get_attribute("#shortcuts-help", "role") == "dialog"
    page.keyboard.press("Escape")
    page.wait_for_selector("#shortcuts-help", state="hidden")

    # "?" outside a text box opens it too.
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("?")
    page.wait_for_selector("#shortcuts-help:popover-open")
    page.keyboard.press("Escape")
    page.wait_for_selector("#shortcuts-help", state="hidden")

    # Shift+Esc puts the cursor in the message box; ArrowUp there, empty, edits the last message.
    page.keyboard.press("Shift+Escape")
    assert page.evaluate("document.activeElement.matches('#composer textarea')")
    page.keyboard.press("ArrowUp")
    last = page.locator(".msg-user").last
    assert last.locator("details.msg-edit[open]").count() == 1
    assert page.locator("details.msg-edit[open]").count() == 1
    assert page.evaluate("document.activeElement.value") == "Question 9?"
    _within_screen(page.evaluate(SHOWN_BOX, "details.msg-edit[open] textarea"), viewport)

    # Ctrl+Shift+O starts a new conversation.
    page.keyboard.press("Control+Shift+O")
    page.wait_for_url(lambda url: f"/c/{conversation.pk}/" not in url and "/c/" in url)
    assert Conversation.objects.filter(owner=user).count() == 2


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["wide", "phone"])
def test_the_theme_switch_flips_the_background_and_is_kept(
    browser_page, asgi_server, user, viewport
):
    page = browser_page(viewport, "light")
    assert page.evaluate(BACKGROUND) == LIGHT_BG
    switch = page.evaluate(SHOWN_BOX, "#theme-choice")
    _within_screen(switch, viewport)
    head = page.evaluate(SHOWN_BOX, ".topbar")
    assert head["top"] <= switch["top"] and switch["bottom"] <= head["bottom"]

    with page.expect_response(lambda r: r.url.endswith("/accounts/settings/theme/")) as saved:
        page.select_option("#theme-choice", "dark")
    assert page.evaluate(BACKGROUND) == DARK_BG
    text = page.evaluate("getComputedStyle(document.body).color")
    assert text == "rgb(228, 231, 236)", "dark text on the dark background"
    assert saved.value.ok
    assert user_settings_for(user=user).theme == "dark"

    page.reload()
    assert page.get_attribute("html", "data-theme") == "dark"
    assert page.evaluate(BACKGROUND) == DARK_BG

    # "Light" wins over a dark system, "System" follows it.
    page.emulate_media(color_scheme="dark")
    page.select_option("#theme-choice", "light")
    assert page.evaluate(BACKGROUND) == LIGHT_BG
    page.select_option("#theme-choice", "system")
    assert page.evaluate(BACKGROUND) == DARK_BG


@pytest.mark.parametrize(("viewport", "scheme"), LOOKS)
def test_the_browsers_time_zone_is_taken_on_the_first_login(browser_page, user, viewport, scheme):
    assert user_settings_for(user=user).time_zone == settings.TIME_ZONE

    page = browser_page(viewport, scheme, timezone_id="Pacific/Auckland")

    # The page drops the address it sends the zone to once the server has taken it.
    expect(page.locator("body")).not_to_have_attribute("data-time-zone-url", re.compile(".*"))
    assert user_settings_for(user=user).time_zone == "Pacific/Auckland"


@pytest.mark.parametrize(("viewport", "scheme"), LOOKS)
def test_the_picker_offers_chat_models_only_and_the_pick_is_kept_and_answers(
    browser_page, asgi_server, user, llm_stub, served, viewport, scheme
):
    served(settings.THALAMUS_CHAT_MODEL, settings.THALAMUS_EMBED_MODEL, "demo", "bge-m3")
    conversation = Conversation.objects.create(owner=user, title="Models")
    page = browser_page(viewport, scheme)
    _open(page, asgi_server, conversation)

    options = page.locator("#chat-model option")
    assert options.count() == 2
    assert options.all_inner_texts() == [settings.THALAMUS_CHAT_MODEL, "demo"]
    picker = page.evaluate(SHOWN_BOX, "#chat-model")
    _within_screen(picker, viewport)
    head = page.evaluate(SHOWN_BOX, ".chat-head")
    assert head["top"] <= picker["top"] and picker["bottom"] <= head["bottom"]
    title = page.evaluate(SHOWN_BOX, "#chat-title")
    # Beside the title on a wide screen, under it on a phone: never over it.
    assert title["right"] <= picker["left"] + 0.5 or title["bottom"] <= picker["top"] + 0.5, (
        "the picker covers the title"
    )

    with page.expect_response(lambda r: r.url.endswith(f"/c/{conversation.pk}/model")) as sent:
        page.select_option("#chat-model", "demo")
    assert sent.value.status == 204
    page.reload()
    assert page.locator("#chat-model").input_value() == "demo"

    llm_stub.script({"content": "From the demo model."})
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    page.fill("#composer textarea", "Who answers?")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-assistant.complete")
    line = page.locator(".msg-assistant [data-subsystem='llm']").inner_text()
    assert "demo" in line
    asked = [r["body"]["model"] for r in llm_stub.requests if r["path"] == "/v1/chat/completions"]
    assert "demo" in asked and settings.THALAMUS_CHAT_MODEL not in asked
