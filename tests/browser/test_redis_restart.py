"""Redis restarted in the middle of a chat: the page comes back and nothing saved is lost.

A web server of the test's own on a private Redis (tests/private_servers.py): the shared one
serves every other test process.
"""

from __future__ import annotations

import time

import pytest

from apps.chat.models import Conversation, Message
from tests.private_servers import private_redis, redis_url, web_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECOVERY_SECONDS = 30
LONG_ANSWER = " ".join(f"w{i}" for i in range(40))


def _send(page, text: str, *, timeout: float | None = None) -> None:
    page.wait_for_selector("#composer textarea:not([disabled])", timeout=timeout)
    page.fill("#composer textarea", text)
    page.keyboard.press("Enter")


def test_a_redis_restart_mid_answer_loses_no_saved_message_and_the_page_recovers(
    page, user, llm_stub
):
    conversation = Conversation.objects.create(owner=user)
    llm_stub.script(
        {"content": "First answer.", "match": "first question"},
        # Streams for ten seconds: Redis goes down while it does.
        {"content": LONG_ANSWER, "tps": 4, "match": "long question"},
        {"content": "Third answer.", "match": "third question"},
    )
    with private_redis() as redis, web_server(redis=redis_url(redis)) as url:
        page.goto(f"{url}/accounts/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", "correct-horse-battery-9")
        page.click("button[type=submit]")
        page.wait_for_url(lambda address: "/accounts/login/" not in address)
        page.goto(f"{url}/c/{conversation.pk}/")
        page.wait_for_selector(".chat[data-live='on']", state="attached")

        _send(page, "first question")
        page.wait_for_selector(".msg-assistant.complete")
        _send(page, "long question")
        page.locator(".msg-assistant .md-out", has_text="w3").wait_for()

        redis.stop()
        redis.start()
        restarted = time.monotonic()

        # Back: live again, and a new message gets its answer.
        page.wait_for_selector(
            ".chat[data-live='on']", state="attached", timeout=RECOVERY_SECONDS * 1000
        )
        # The box opens once the long answer ends, ten seconds after it began.
        _send(page, "third question", timeout=RECOVERY_SECONDS * 1000)
        page.locator(".msg-assistant.complete", has_text="Third answer.").wait_for(
            timeout=RECOVERY_SECONDS * 1000
        )
        recovered = time.monotonic() - restarted
        page.reload()
        shown = page.locator(".msg-user .msg-body").all_inner_texts()

    assert recovered < RECOVERY_SECONDS, f"recovered in {recovered:.1f} s"
    messages = Message.objects.filter(conversation=conversation).order_by("pk")
    assert [m.content for m in messages if m.role == "user"] == [
        "first question",
        "long question",
        "third question",
    ]
    assert shown == ["first question", "long question", "third question"]
    replies = [m for m in messages if m.role == "assistant"]
    # The answer streaming across the restart goes on: the asking page gets it directly.
    assert [(r.status, r.content) for r in replies] == [
        ("complete", "First answer."),
        ("complete", LONG_ANSWER),
        ("complete", "Third answer."),
    ]
