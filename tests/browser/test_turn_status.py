"""The turn's status line and its steps in the "What I used" panel, in Chromium."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(os.environ.get("THALAMUS_SCREENSHOTS", "/tmp/thalamus-shots"))


def test_the_status_line_and_the_steps_show_under_an_answer(
    page, asgi_server, log_in, user, llm_stub
):
    llm_stub.script(
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "17 * 23"}}]},
        {"content": "That is all I need."},
        {"content": "17 × 23 is **391**."},
    )
    log_in("alice")
    page.click("text=+ New conversation")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    page.fill("#composer textarea", "What is 17 * 23?")
    page.keyboard.press("Enter")

    answer = page.locator(".msg-assistant.complete")
    answer.wait_for()
    line = answer.locator(".msg-turn")
    # Timings and routes are for engineers: behind the header's Details toggle, off at first.
    line.wait_for(state="hidden")
    assert not answer.locator("details.trace").is_visible()
    page.click("[data-details-toggle]")
    line.wait_for()
    assert line.locator("[data-subsystem='router']").inner_text() == "router gather (rule)"
    assert "1 call" in line.locator("[data-subsystem='tools']").inner_text()
    assert line.locator("[data-subsystem='llm']").inner_text().startswith("LLM ")
    assert line.locator(".turn-error").count() == 0

    # A pushed answer's panel is read from the server as it opens.
    answer.locator("details.trace > summary").click()
    # It opens on what was used; the steps are behind its Details.
    details = answer.locator("details.trace-details")
    details.wait_for()
    assert not answer.locator(".trace-spans").is_visible()
    details.locator("summary").click()
    steps = answer.locator(".trace-spans li")
    steps.first.wait_for()
    names = [steps.nth(i).locator("code").inner_text() for i in range(steps.count())]
    assert names == ["recall", "route", "tools", "world", "assemble", "answer"]
    assert "calculator" in answer.locator(".trace-tools").inner_text()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        answer.screenshot(path=str(SHOTS / f"turn-status-{scheme}.png"))


def test_a_temporary_chat_says_nothing_is_learned_instead_of_queueing_reflection(
    page, asgi_server, log_in, user, llm_stub
):
    llm_stub.script({"content": "Noted, for this chat only."})
    log_in("alice")
    page.click(".new-conversation button[name=temporary]")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    page.click("[data-details-toggle]")
    page.fill("#composer textarea", "My bees are called Ada and Bob.")
    page.keyboard.press("Enter")

    answer = page.locator(".msg-assistant.complete")
    reflection = answer.locator(".msg-turn [data-subsystem='reflection']")
    reflection.wait_for()
    assert reflection.inner_text() == "reflection nothing is learned here"
    assert "nothing is learned here" in answer.locator("details.receipt summary").inner_text()
    page.reload()
    reflection.wait_for()
    assert reflection.inner_text() == "reflection nothing is learned here"
