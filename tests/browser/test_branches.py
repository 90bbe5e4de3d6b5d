"""Edit, regenerate and switch branches in Chromium, at 1400 and 390 px, light and dark."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from apps.chat.models import Conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/tmp/thalamus-shots")
WIDE = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}

BOX = (
    "el => { const r = el.getBoundingClientRect();"
    " return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; }"
)
# The colour of an element's text and of the first background behind it that is not clear.
COLOURS = """el => {
  let p = el;
  let bg = 'rgba(0, 0, 0, 0)';
  while (p && (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent')) {
    bg = getComputedStyle(p).backgroundColor; p = p.parentElement;
  }
  return [getComputedStyle(el).color, bg];
}"""


def _luminance(css: str) -> float:
    red, green, blue = (int(float(v)) for v in css[css.index("(") + 1 : -1].split(",")[:3])

    def channel(value: int) -> float:
        value /= 255
        return value / 12.92 if value <= 0.03928 else ((value + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(red) + 0.7152 * channel(green) + 0.0722 * channel(blue)


def _contrast(page, selector: str) -> float:
    text, background = page.locator(selector).first.evaluate(COLOURS)
    light, dark = sorted((_luminance(text), _luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _box(page, selector: str) -> dict:
    locator = page.locator(selector)
    assert locator.count() == 1, f"{selector} is shown {locator.count()} times"
    return locator.evaluate(BOX)


def _inside(inner: dict, outer: dict) -> bool:
    return (
        outer["left"] - 0.5 <= inner["left"]
        and inner["right"] <= outer["right"] + 0.5
        and outer["top"] - 0.5 <= inner["top"]
        and inner["bottom"] <= outer["bottom"] + 0.5
    )


def _apart(a: dict, b: dict) -> bool:
    return (
        a["right"] <= b["left"] + 0.5
        or b["right"] <= a["left"] + 0.5
        or a["bottom"] <= b["top"] + 0.5
        or b["bottom"] <= a["top"] + 0.5
    )


def _check_layout(page, viewport: dict, name: str) -> None:
    """In light and dark: the switcher and Edit sit under the bubble, apart from it and from
    each other, on the screen, readable."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        bubble = _box(page, ".msg-user .msg-body")
        switch = _box(page, ".msg-user .branch-switch")
        edit = _box(page, ".msg-user .msg-edit > summary")
        message = _box(page, ".msg-user")
        for part in (switch, edit):
            assert _inside(part, message) and part["right"] <= viewport["width"]
            assert part["top"] >= bubble["bottom"] - 0.5, "an action is not under the bubble"
        assert _apart(switch, edit)
        assert _contrast(page, ".msg-user .branch-place") >= 3, f"the k / n is faint in {scheme}"
        page.screenshot(path=str(SHOTS / f"branches-{name}-{scheme}.png"), animations="disabled")
    page.emulate_media(color_scheme="light")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["wide", "phone"])
def test_a_user_edits_a_message_switches_back_and_regenerates_an_answer(
    page, asgi_server, log_in, user, llm_stub, viewport
):
    name = "wide" if viewport is WIDE else "phone"
    conversation = Conversation.objects.create(owner=user)
    page.set_viewport_size(viewport)
    log_in("alice")
    page.goto(f"{asgi_server}/c/{conversation.pk}/")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    llm_stub.script({"content": "Tea, then."})
    page.fill("#composer textarea", "I like tea")
    page.keyboard.press("Enter")
    page.locator(".msg-assistant.complete", has_text="Tea, then.").wait_for()
    assert page.locator(".branch-switch").count() == 0, "a switcher without versions"
    assert page.locator(".regenerate-form").count() == 1
    assert page.locator(".msg-edit").count() == 1

    # Edit: the box opens in place, Cancel folds it with the text as it was.
    page.click(".msg-user .msg-edit > summary")
    box = page.locator(".msg-user .msg-edit textarea")
    box.fill("I like coffee")
    area = box.evaluate(BOX)
    assert area["left"] >= 0 and area["right"] <= viewport["width"]
    assert area["right"] - area["left"] >= min(300, viewport["width"] - 80)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert _contrast(page, ".msg-user .msg-edit textarea") >= 4.5
        page.screenshot(path=str(SHOTS / f"branches-editing-{name}-{scheme}.png"))
    page.emulate_media(color_scheme="light")
    page.click(".msg-user [data-edit-cancel]")
    assert not page.locator(".msg-user .msg-edit textarea").is_visible()
    assert box.input_value() == "I like tea"

    page.click(".msg-user .msg-edit > summary")
    box.fill("I like coffee")
    llm_stub.script({"content": "Coffee, then."})
    page.click(".msg-user .msg-edit button[type=submit]")
    page.locator(".msg-assistant.complete", has_text="Coffee, then.").wait_for()
    assert page.locator(".msg").count() == 2
    assert page.locator(".msg-user .msg-body").inner_text() == "I like coffee"
    assert page.locator(".msg-user .branch-place").inner_text() == "2 / 2"
    assert page.locator(".msg-assistant .branch-switch").count() == 0
    _check_layout(page, viewport, name)

    # Back to the first version: its question and its answer.
    page.click(".msg-user .branch-previous")
    page.locator(".msg-assistant.complete", has_text="Tea, then.").wait_for()
    assert page.locator(".msg-user .branch-place").inner_text() == "1 / 2"
    assert page.locator(".msg-user .msg-body").inner_text() == "I like tea"
    assert page.locator(".msg").count() == 2
    assert page.locator(".msg-user .branch-previous").is_disabled()

    # Regenerate the answer: a second version of it, the first one a click away.
    llm_stub.script({"content": "Tea, again."})
    page.click(".regenerate-form button")
    page.locator(".msg-assistant.complete", has_text="Tea, again.").wait_for()
    assert page.locator(".msg-assistant .branch-place").inner_text() == "2 / 2"
    assert page.locator(".msg-user .branch-place").inner_text() == "1 / 2"
    assert page.locator(".msg").count() == 2
    answer_switch = _box(page, ".msg-assistant .branch-switch")
    assert answer_switch["right"] <= viewport["width"] and answer_switch["left"] >= 0
    page.reload()
    page.locator(".msg-assistant.complete", has_text="Tea, again.").wait_for()
    assert page.locator(".msg-assistant .branch-place").inner_text() == "2 / 2"

    # Delete asks first, in place; the other version of the message is shown then.
    page.click(".msg-user .msg-delete > summary")
    ask = _box(page, ".msg-user .delete-form")
    assert ask["left"] >= 0 and ask["right"] <= viewport["width"]
    page.click(".msg-user .delete-form button[type=submit]")
    # It waits for its Undo (tests/browser/test_plain_words.py); its × sends it now.
    page.click("#message-undo [data-delete-now]")
    page.locator(".msg-user .msg-body", has_text="I like coffee").wait_for()
    assert page.locator(".msg").count() == 2
    assert page.locator(".branch-switch").count() == 0
    # The notice is its own fragment, which may land after the message's removal.
    expect(page.locator("#chat-notice")).to_contain_text("Deleted.")
