from __future__ import annotations

import re
from pathlib import Path

import pytest

from apps.chat.models import Conversation, Message

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/tmp/thalamus-shots")
WIDE = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}
VIEWPORTS = [pytest.param(WIDE, id="wide"), pytest.param(PHONE, id="phone")]

# The part of each element the user can see: its box clipped by every scrolling ancestor, or
# null when it is scrolled out of sight.
VISIBLE_BOXES = """selector => [...document.querySelectorAll(selector)].map(el => {
  let r = el.getBoundingClientRect();
  let box = {left: r.left, top: r.top, right: r.right, bottom: r.bottom};
  for (let p = el.parentElement; p; p = p.parentElement) {
    if (getComputedStyle(p).overflowY === 'visible') continue;
    const c = p.getBoundingClientRect();
    box = {left: Math.max(box.left, c.left), top: Math.max(box.top, c.top),
           right: Math.min(box.right, c.right), bottom: Math.min(box.bottom, c.bottom)};
  }
  if (box.right - box.left < 1 || box.bottom - box.top < 1) return null;
  return {id: el.id, ...box};
}).filter(Boolean)"""


def _overlap(a: dict, b: dict) -> bool:
    return (
        a["left"] < b["right"] - 0.5
        and b["left"] < a["right"] - 0.5
        and a["top"] < b["bottom"] - 0.5
        and b["top"] < a["bottom"] - 0.5
    )


def _box(page, selector: str) -> dict:
    boxes = page.evaluate(VISIBLE_BOXES, selector)
    assert len(boxes) == 1, f"{selector} is not shown once: {boxes}"
    return boxes[0]


def _shoot(page, name: str) -> None:
    """Light and dark: the chat must look finished in both."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.screenshot(path=str(SHOTS / f"{name}-{scheme}.png"), animations="disabled")
    page.emulate_media(color_scheme="light")


def _long_conversation(user, title: str = "Beekeeping through a wet winter") -> Conversation:
    conversation = Conversation.objects.create(owner=user, title=title)
    for i in range(12):
        Message.objects.create(
            conversation=conversation, role="user", content=f"Question {i}: " + "why so? " * 12
        )
        Message.objects.create(
            conversation=conversation, role="assistant", content=f"Answer {i}. " + "Because. " * 60
        )
    return conversation


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_title_bar_and_the_composer_never_overlap_the_messages_scrolled_under_them(
    page, asgi_server, log_in, user, viewport
):
    conversation = _long_conversation(user, title="Beekeeping through a wet winter " * 3)
    page.set_viewport_size(viewport)
    log_in("alice")
    page.goto(f"{asgi_server}/c/{conversation.pk}/")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    name = "wide" if viewport is WIDE else "phone"
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for fraction in (0.0, 0.37, 0.5, 1.0):
            page.evaluate(
                "f => { const l = document.getElementById('messages');"
                " l.scrollTop = f * (l.scrollHeight - l.clientHeight); }",
                fraction,
            )
            title = _box(page, ".chat-head")
            composer = _box(page, "#composer-box")
            messages = page.evaluate(VISIBLE_BOXES, ".msg")
            assert messages, "no message in view"
            for message in messages:
                assert not _overlap(title, message), f"the title bar covers {message['id']}"
                assert not _overlap(composer, message), f"the composer covers {message['id']}"
            # What is drawn at the title's centre is the title bar, not a message above it.
            drawn = page.evaluate(
                "([x, y]) => !!document.elementFromPoint(x, y).closest('.chat-head')",
                [(title["left"] + title["right"]) / 2, (title["top"] + title["bottom"]) / 2],
            )
            assert drawn, "something is drawn over the title bar"
            assert title["right"] <= viewport["width"] and composer["right"] <= viewport["width"]
            assert composer["bottom"] <= viewport["height"], "the composer is below the screen"
        page.evaluate("document.getElementById('messages').scrollTop = 700")
        page.screenshot(
            path=str(SHOTS / f"chat-scrolled-{name}-{scheme}.png"), animations="disabled"
        )
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_typing_on_the_home_page_starts_a_conversation_and_stop_takes_the_place_of_send(
    page, asgi_server, log_in, user, llm_stub, viewport
):
    llm_stub.script({"content": "Slowly, " + "buzz " * 200, "tps": 5})
    page.set_viewport_size(viewport)
    log_in("alice")
    page.goto(f"{asgi_server}/")
    name = "wide" if viewport is WIDE else "phone"
    _shoot(page, f"home-{name}")
    page.fill("#composer textarea", "Tell me about bees, slowly.")
    page.keyboard.press("Enter")

    page.wait_for_url(re.compile(r"/c/\d+/$"))
    stop = page.locator("#stop-form button", has_text="Stop")
    stop.wait_for()
    page.locator(".msg-assistant .md-out", has_text="buzz").wait_for()
    conversation = Conversation.objects.get(owner=user)
    assert page.url.endswith(f"/c/{conversation.pk}/")
    assert page.locator(".msg-user .msg-body").inner_text() == "Tell me about bees, slowly."
    assert page.locator("#composer textarea").input_value() == "", "the draft was not sent"
    # Stop sits in the composer, where Send was.
    composer = _box(page, "#composer-box")
    stop_box = _box(page, "#stop-form button")
    assert composer["left"] <= stop_box["left"] and stop_box["right"] <= composer["right"]
    assert composer["top"] <= stop_box["top"] and stop_box["bottom"] <= composer["bottom"]
    assert stop_box["left"] > (composer["left"] + composer["right"]) / 2, "Stop is not at the right"
    assert page.locator("#composer button[type=submit]").count() == 0, "Send shown beside Stop"
    _shoot(page, f"streaming-{name}")

    stop.click()
    page.wait_for_selector(".msg-assistant.cancelled")
    page.wait_for_selector("#composer button[type=submit]", state="visible")
    assert page.locator("#stop-form button").count() == 0
    reply = Message.objects.get(role="assistant")
    assert reply.status == "cancelled" and reply.conversation_id == conversation.pk
    # The message went once: reloading the page does not send the draft again.
    page.reload()
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1
    assert page.locator("#composer textarea").input_value() == ""


def test_the_home_composer_starts_a_conversation_without_javascript(
    chromium, asgi_server, user, llm_stub
):
    llm_stub.script({"content": "Bees dance to tell where the flowers are."})
    context = chromium.new_context(java_script_enabled=False, viewport=PHONE)
    try:
        page = context.new_page()
        page.goto(f"{asgi_server}/accounts/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", "correct-horse-battery-9")
        page.click("button[type=submit]")
        page.wait_for_url(f"{asgi_server}/")
        page.fill("#composer textarea", "Why do bees dance?")
        page.click("#composer button[type=submit]")
        page.wait_for_url(re.compile(r"/c/\d+/$"))
        answer = page.locator(".msg-assistant.complete")
        assert "Bees dance to tell" in answer.inner_text()
        assert page.locator(".msg-user .msg-body").inner_text() == "Why do bees dance?"
        conversation = Conversation.objects.get(owner=user)
        assert page.url.endswith(f"/c/{conversation.pk}/")

        # The list opens without a script too: the button is a link to it.
        page.click(".sidebar-toggle")
        page.locator(f"#conv-{conversation.pk} a.conv-link").wait_for(state="visible")
    finally:
        context.close()


def test_an_empty_message_on_the_home_page_starts_nothing(client, user):
    client.force_login(user)
    response = client.post("/c/begin", {"content": "  \n "})
    assert response.status_code == 302 and response["Location"] == "/"
    assert not Conversation.objects.exists()


def test_the_conversation_list_is_reachable_on_a_phone(page, asgi_server, log_in, user):
    here = _long_conversation(user, title="Here and now")
    elsewhere = _long_conversation(user, title="Somewhere else")
    page.set_viewport_size(PHONE)
    log_in("alice")
    page.goto(f"{asgi_server}/c/{here.pk}/")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    link = page.locator(f"#conv-{elsewhere.pk} a.conv-link")
    assert not link.is_visible(), "the list takes the phone's screen before it is asked for"

    page.click(".sidebar-toggle")
    link.wait_for(state="visible")
    box = link.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"]
    _shoot(page, "phone-list")
    page.click(".sidebar-close")
    link.wait_for(state="hidden")

    page.click(".sidebar-toggle")
    link.click()
    page.wait_for_url(f"{asgi_server}/c/{elsewhere.pk}/")
    page.wait_for_selector(".chat-title:has-text('Somewhere else')")
    assert not link.is_visible(), "the list stays open over the conversation it opened"

    # The home page links to the list too.
    page.goto(f"{asgi_server}/")
    page.click(".home-list-link")
    page.locator(f"#conv-{here.pk} a.conv-link").wait_for(state="visible")
