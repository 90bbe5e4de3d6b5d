"""The receipt under an answer: Wrong and Forget with the memory browser's Undo notice, and a
title the worker gives a conversation naming the browser's tab, in Chromium."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from apps.chat.models import Conversation, Message
from apps.memory import services
from apps.memory.models import MemoryNode
from tests.browser.screens import LUMINANCE, SCREENS, SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _answered(owner, used: list[MemoryNode]) -> tuple[Conversation, Message]:
    conversation = Conversation.objects.create(owner=owner, title="Bees")
    asked = Message.objects.create(conversation=conversation, role="user", content="My bees?")
    reply = Message.objects.create(
        conversation=conversation,
        role="assistant",
        status="complete",
        content="They are well.",
        reply_to=asked,
        trace={"memory": {"memories": [{"id": node.pk, "score": 0.5} for node in used]}},
    )
    return conversation, reply


def _inside(box: dict, viewport: dict) -> bool:
    return (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= viewport["width"] + 0.5
        and box["y"] + box["height"] <= viewport["height"] + 0.5
    )


def _open_receipt(page, reply: Message):
    receipt = page.locator(f"#receipt-{reply.pk}")
    receipt.locator("summary").click()
    return receipt


@pytest.mark.parametrize(("viewport", "scheme"), SCREENS)
def test_the_receipts_wrong_and_forget_offer_undo_and_its_counts_follow(
    page, asgi_server, log_in, user, viewport, scheme
):
    bees = services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    turin = services.memory_node_create(
        owner=user, description="Alice lives in Turin", embed=False, source="admin"
    )
    conversation, reply = _answered(user, [bees, turin])
    page.set_viewport_size(viewport)
    page.emulate_media(color_scheme=scheme)
    log_in("alice")
    page.goto(f"{asgi_server}/c/{conversation.pk}/")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    receipt = _open_receipt(page, reply)
    summary = receipt.locator("summary .receipt-line")
    assert summary.inner_text().startswith("used 2 memories")
    notice = page.locator("#memory-undo")
    assert not notice.is_visible()

    receipt.locator(f"[data-memory='{turin.pk}'] button", has_text="Wrong").click()

    notice.locator(".undo-said", has_text="Marked wrong").wait_for()
    receipt.locator("summary", has_text="used 1 memory").wait_for()
    assert receipt.locator(f"[data-memory='{turin.pk}']").count() == 0
    assert receipt.get_attribute("open") is not None, "the receipt stays open"
    box = notice.bounding_box()
    assert _inside(box, viewport), box
    assert box["width"] >= 200 and box["height"] >= 30, box
    undo = notice.locator("button.undo-button")
    undo_box = undo.bounding_box()
    assert undo_box["height"] >= 24 and undo_box["width"] >= 40, undo_box
    assert _inside(undo_box, viewport), undo_box
    composer = page.locator("#composer").bounding_box()
    assert box["y"] + box["height"] <= composer["y"], "the notice leaves the composer free"
    # What is drawn at the Undo's centre is the Undo, not the composer or a message.
    centre = [undo_box["x"] + undo_box["width"] / 2, undo_box["y"] + undo_box["height"] / 2]
    assert page.evaluate(
        "([x, y]) => !!document.elementFromPoint(x, y).closest('.undo-button')", centre
    )
    luminance = notice.evaluate(LUMINANCE)
    assert (luminance < 0.35) if scheme == "dark" else (luminance > 0.65), luminance
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"receipt-undo-{viewport['width']}-{scheme}.png"))

    undo.click()

    receipt.locator(f"[data-memory='{turin.pk}']").wait_for()
    receipt.locator("summary", has_text="used 2 memories").wait_for()
    notice.locator(".undo-said", has_text="Back in use").wait_for()
    turin.refresh_from_db()
    assert turin.valid_to is None

    receipt.locator(f"[data-memory='{bees.pk}'] button", has_text="Forget").click()
    notice.locator(".undo-said", has_text="Forgotten").wait_for()
    receipt.locator("summary", has_text="used 1 memory").wait_for()
    assert MemoryNode.objects.filter(pk=bees.pk).exists(), "kept while Undo is offered"
    notice.locator("button.undo-button").click()
    receipt.locator(f"[data-memory='{bees.pk}']").wait_for()
    notice.locator(".undo-said", has_text="Kept").wait_for()
    # The receipt comes twice, in the response and pushed over the socket: each push says how
    # it stood when sent, so the Forget's may land after the Undo's response.
    expect(receipt.locator("summary .receipt-line")).to_have_text(re.compile(r"^used 2 memories"))

    receipt.locator(f"[data-memory='{bees.pk}'] button", has_text="Forget").click()
    notice.locator(".undo-said", has_text="Forgotten").wait_for()
    notice.locator(".undo-dismiss").click()
    page.locator("#forget-receipt", has_text="Forgot 1 memory").wait_for()
    assert not notice.is_visible()
    assert not MemoryNode.objects.filter(pk=bees.pk).exists()
    expect(receipt.locator("summary .receipt-line")).to_have_text(re.compile(r"^used 1 memory"))
    page.reload()
    receipt = _open_receipt(page, reply)
    assert receipt.locator(".receipt-memory").count() == 1
    assert "Alice keeps bees" not in receipt.inner_text()


def test_a_receipts_forget_left_alone_goes_for_good_when_its_undo_runs_out(
    page, asgi_server, log_in, user
):
    bees = services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    conversation, reply = _answered(user, [bees])
    log_in("alice")
    page.goto(f"{asgi_server}/c/{conversation.pk}/")
    receipt = _open_receipt(page, reply)
    receipt.locator(f"[data-memory='{bees.pk}'] button", has_text="Forget").click()
    page.locator("#memory-undo .undo-said", has_text="Forgotten").wait_for()
    assert MemoryNode.objects.filter(pk=bees.pk).exists(), "kept while Undo is offered"

    page.locator("#forget-receipt", has_text="Forgot 1 memory").wait_for(timeout=20_000)

    assert not page.locator("#memory-undo").is_visible()
    assert not MemoryNode.objects.filter(pk=bees.pk).exists()


def test_a_title_the_worker_gives_names_the_tab_too(
    page, asgi_server, log_in, user, llm_stub, celery_worker
):
    from apps.chat.tasks import title_conversation

    conversation, _ = _answered(user, [])
    Conversation.objects.filter(pk=conversation.pk).update(title="")
    llm_stub.script({"content": "Beekeeping in Turin"})
    log_in("alice")
    page.goto(f"{asgi_server}/c/{conversation.pk}/")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    page.evaluate("window.notReloaded = true")
    assert page.title() != "Beekeeping in Turin · Thalamus"

    title_conversation.delay(conversation.pk).get(timeout=45)  # background work

    page.locator("#chat-title", has_text="Beekeeping in Turin").wait_for()
    # A function, compiled once: a bare expression is eval'd at each poll, which the CSP refuses.
    page.wait_for_function("() => document.title === 'Beekeeping in Turin · Thalamus'")
    assert page.evaluate("window.notReloaded") is True
