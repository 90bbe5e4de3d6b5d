"""The small things people expect, in Chromium: no console errors as messages go, Esc cancels
an edit, a deleted message can be undone for a few seconds, engineers' details wait behind a
toggle, and What Forget did can be closed. One page and one login for all of them."""

from __future__ import annotations

import pytest

from apps.chat.models import Message
from apps.memory import services
from tests.browser.screens import PHONE, SHOTS, WIDE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORDS_SHOTS = SHOTS / "words"


def _shoot(page, name: str) -> None:
    """The page at 1400 and 390 px, light and dark."""
    WORDS_SHOTS.mkdir(parents=True, exist_ok=True)
    for size, width in ((WIDE, "wide"), (PHONE, "phone")):
        page.set_viewport_size(size)
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            page.screenshot(path=str(WORDS_SHOTS / f"{name}-{width}-{scheme}.png"))
    page.set_viewport_size(WIDE)
    page.emulate_media(color_scheme="light")


def test_the_small_things_people_expect(page, asgi_server, log_in, user, llm_stub):
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    log_in("alice")
    page.click("text=+ New conversation")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    for n, text in enumerate(["My first message", "My second message"], start=1):
        page.fill("#composer textarea", text)
        page.keyboard.press("Enter")
        page.locator(".msg-assistant.complete").nth(n - 1).wait_for()
    assert not page.locator("#chat-empty").is_visible()
    assert errors == [], "no htmx:oobErrorNoTarget #chat-empty, or any other, as messages go"

    # Timings and routes are behind Details, off by default and remembered in this browser.
    turn = page.locator(".msg-assistant .msg-turn").first
    assert not turn.is_visible() and not page.locator("details.trace").first.is_visible()
    page.click("[data-details-toggle]")
    turn.wait_for()
    assert page.locator("[data-details-toggle]").get_attribute("aria-pressed") == "true"
    page.reload()
    page.locator(".msg-assistant .msg-turn").first.wait_for()
    page.click("[data-details-toggle]")
    page.locator(".msg-assistant .msg-turn").first.wait_for(state="hidden")

    # Esc cancels an inline edit, its text as it was.
    first = page.locator(".msg-user").first
    first.locator("[data-action='edit']").click()
    box = first.locator(".revise-form textarea")
    box.fill("Something else entirely")
    box.press("Escape")
    assert first.locator("details.msg-edit").get_attribute("open") is None
    assert box.input_value() == "My first message"
    assert page.locator(".msg").count() == 4, "Esc in an edit stops nothing and sends nothing"

    # Delete waits for its Undo: the message and what follows it hide, and come back.
    second = page.locator(".msg-user").nth(1)
    second.locator("details.msg-delete > summary").click()
    second.locator(".delete-form button[type=submit]").click()
    notice = page.locator("#message-undo")
    notice.wait_for()
    assert page.locator(".msg:visible").count() == 2
    _shoot(page, "delete-undo")
    notice.locator("[data-delete-undo]").click()
    assert notice.is_hidden() and page.locator(".msg:visible").count() == 4
    assert Message.objects.filter(content="My second message").exists()
    # Its × deletes at once.
    second.locator("details.msg-delete > summary").click()
    second.locator(".delete-form button[type=submit]").click()
    notice.locator("[data-delete-now]").click()
    page.locator(".msg-user").nth(1).wait_for(state="detached")
    assert not Message.objects.filter(content="My second message").exists()
    # What the deletion did is said, and closes at its ×.
    said = page.locator("#chat-notice", has_text="Deleted")
    said.locator("[data-close-notice]").click()
    assert page.locator("#chat-notice").inner_text() == ""
    assert errors == []
    _shoot(page, "chat")

    # What Forget did closes.
    services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    page.goto(f"{asgi_server}/memory/forget-everything")
    page.fill("#forget-all-form input[name=confirm]", "forget everything")
    page.click("#forget-all-form button[type=submit]")
    receipt = page.locator("#forget-receipt")
    receipt.locator(".receipt-close").wait_for()
    _shoot(page, "forget-receipt")
    receipt.locator(".receipt-close").click()
    assert receipt.inner_text() == ""
    assert errors == []
