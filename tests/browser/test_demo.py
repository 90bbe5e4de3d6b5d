"""The demo model in Chromium: a newcomer chats and watches the Mind page remember."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.memory import tasks as memory_tasks
from apps.memory.models import MemoryNode
from llm_stub import StubServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_stub():
    stub = StubServer(port=0, demo=True).start()
    yield stub
    stub.stop()


def test_after_a_demo_chat_the_mind_page_shows_the_memory_criticised_and_promoted(
    page, asgi_server, log_in, user, config, demo_stub, celery_worker
):
    # Reflection starts once the conversation is quiet for a second, not the shipped 20.
    config(llm_base_url=demo_stub.url, promotion_threshold=2, reflection_quiet_seconds=1)
    log_in("alice")
    page.click("text=+ New conversation")
    page.wait_for_selector("#composer textarea:not([disabled])")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    page.fill("#composer textarea", "Hi! My name is Ada and I build synthesizers.")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-assistant.complete")
    assert "demo model" in page.locator(".msg-assistant.complete").inner_text()

    page.goto(f"{asgi_server}/dashboard/")
    page.locator("#live-status.on").wait_for()
    stream = page.locator("#mind-stream")
    # Reflection is background work: on a loaded machine it may take longer than a click.
    # Each memory gets its own critique, pushed as it is made: read the one waited for.
    critique = stream.locator(".kind-critique", has_text="your name is Ada").first
    critique.wait_for(timeout=45_000)
    expect(critique).to_contain_text("it holds, so I trust it more")

    memory_tasks.promote_and_link.delay().get(timeout=45)  # background work
    stream.locator(".kind-promotion", has_text="Kept 2 memories for the long term").wait_for(
        timeout=45_000
    )
    assert set(MemoryNode.objects.values_list("state", flat=True)) == {"promoted"}
