from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.chat.models import Message
from apps.core.models import RuntimeConfig
from apps.core.services import runtime_config_save
from apps.memory import services as memory_services

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_with_the_debate_on_the_page_says_it_reviews_the_draft_then_shows_the_rewrite(
    page, asgi_server, log_in, user, llm_stub
):
    runtime_config_save(config=RuntimeConfig(debate_enabled=True, turns_per_minute=0))
    memory_services.memory_node_create(
        owner=user, description="Always answer in Italian", kind="rule", embed=False, source="admin"
    )
    llm_stub.script(
        {"content": "The capital is Paris."},
        {
            "json": {
                "violations": ["The draft is in English; the user wants Italian."],
                "verdict": "rewrite",
                "critique": "Answer in Italian.",
            },
            "match": "antagonistic reviewer",
            "ttft": 1.0,  # long enough to see the status
        },
        {"content": "La capitale è Parigi.", "match": "A reviewer found", "tps": 20},
    )
    log_in("alice")
    page.click("text=+ New conversation")
    page.wait_for_selector("#composer textarea:not([disabled])")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    page.fill("#composer textarea", "What is the capital of France?")
    page.keyboard.press("Enter")

    status = page.locator(".msg-assistant .msg-status")
    expect(status).to_be_visible()
    expect(status).to_have_text("Reviewing the draft…")
    assert page.locator("#composer textarea").is_disabled()

    page.wait_for_selector(".msg-assistant.complete")
    assert page.locator(".msg-assistant .md-out").inner_text() == "La capitale è Parigi."
    assert page.locator(".msg-assistant .msg-status").count() == 0
    assert "The capital is Paris" not in page.content()
    page.wait_for_selector("#composer textarea:not([disabled])")
    reply = Message.objects.get(role="assistant")
    assert reply.trace["debate"]["rewritten"] is True
