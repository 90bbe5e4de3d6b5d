"""A new conversation is called by the user's first words as soon as they are sent, in the
sidebar, the header and the tab, while its title waits for the user to pause."""

from __future__ import annotations

import pytest

from apps.chat.models import Conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SAID = "Hi! My name is Laura. I live in Lisbon and I love painting birds on Sundays."
FIRST_WORDS = "Hi! My name is Laura."


def test_a_new_conversation_is_called_by_its_first_words_at_once(
    page, asgi_server, log_in, user, llm_stub
):
    log_in("alice")
    page.click("text=+ New conversation")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    conversation = Conversation.objects.get(owner=user)
    item = page.locator(f"#conv-{conversation.pk} .conv-link")
    assert item.inner_text() == "New conversation"
    page.evaluate("window.notReloaded = true")

    page.fill("#composer textarea", SAID)
    page.keyboard.press("Enter")

    page.locator("#chat-title", has_text=FIRST_WORDS).wait_for()
    item.filter(has_text=FIRST_WORDS).wait_for()
    # A function, compiled once: a bare expression is eval'd at each poll, which the CSP refuses.
    page.wait_for_function(f"() => document.title === {f'{FIRST_WORDS} · Thalamus'!r}")
    assert page.evaluate("window.notReloaded") is True
    # The model's title is still to come: nothing stands in its way.
    assert Conversation.objects.get(pk=conversation.pk).title == ""
