"""#28 items 6, 9 and 10 in Chromium, at 1400 and 390 px, light and dark: Wrong and Forget with
Undo and live counts, the Facts page's relations, "What I used" in words with its details
folded, a rename reaching the header, and the sidebar's API badge and filter."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.chat.conversation_services import conversation_create
from apps.chat.models import Conversation, Message
from apps.memory import graph_services, services
from apps.memory.models import MemoryNode, Triple
from tests.browser.screens import LUMINANCE, PHONE, SCREENS, SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _screen(page, viewport: dict, scheme: str) -> None:
    page.set_viewport_size(viewport)
    page.emulate_media(color_scheme=scheme)


def _inside(box: dict, viewport: dict) -> bool:
    return (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= viewport["width"] + 0.5
        and box["y"] + box["height"] <= viewport["height"] + 0.5
    )


def _assert_scheme(page, selector: str, scheme: str) -> None:
    luminance = page.locator(selector).evaluate(LUMINANCE)
    assert (luminance < 0.35) if scheme == "dark" else (luminance > 0.65), (selector, luminance)


def _shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), animations="disabled")


def _learnt(owner, text: str, city: str) -> tuple[MemoryNode, Triple]:
    reply = Message.objects.create(
        conversation=Conversation.objects.create(owner=owner), role="assistant", content="Ok"
    )
    node = services.memory_node_create(
        owner=owner, description=text, embed=False, source_message=reply, source="inferred"
    )
    triple = graph_services.triple_upsert(
        owner=owner,
        subject="user",
        predicate="lives_in",
        object=city,
        confidence=0.8,
        source_message=reply,
    )
    return node, triple


@pytest.mark.parametrize(("viewport", "scheme"), SCREENS)
def test_wrong_and_forget_offer_undo_and_update_the_counts(
    page, asgi_server, log_in, user, other_user, viewport, scheme
):
    turin, _ = _learnt(user, "Alice lives in Turin", "Turin")
    bees = services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    services.memory_node_create(
        owner=other_user, description="Mallory picks locks", embed=False, source="admin"
    )
    _screen(page, viewport, scheme)
    log_in("alice")
    page.goto(f"{asgi_server}/memory/")
    rows = page.locator(".memory-row")
    assert rows.count() == 2
    assert page.locator("#count-memories").inner_text() == "2"
    assert page.locator("#count-knowledge").inner_text() == "1"
    # One scale: a new memory's score 1 reads as 33%.
    assert page.locator(f"#memory-{bees.pk} .confidence").inner_text() == "33%"
    notice = page.locator("#memory-undo")
    assert not notice.is_visible()

    page.locator(f"#memory-{turin.pk} button", has_text="Wrong").click()

    notice.locator(".undo-said", has_text="Marked wrong").wait_for()
    page.locator(f"#memory-{turin.pk}").wait_for(state="detached")
    page.locator("#count-memories", has_text="1").wait_for()
    assert page.locator("#count-knowledge").inner_text() == "0"
    # The list reads itself again: its own count follows.
    page.locator("#memory-list .bulk-bar .muted", has_text="1 memory").wait_for()
    assert rows.count() == 1
    box = notice.bounding_box()
    assert _inside(box, viewport), box
    undo = notice.locator("button.undo-button")
    undo_box = undo.bounding_box()
    assert undo_box["height"] >= 24 and undo_box["width"] >= 40
    _assert_scheme(page, "#memory-undo", scheme)
    _shoot(page, f"memory-undo-{viewport['width']}-{scheme}")

    undo.click()

    page.locator(f"#memory-{turin.pk}").wait_for()
    page.locator("#count-memories", has_text="2").wait_for()
    assert page.locator("#count-knowledge").inner_text() == "1"
    assert rows.count() == 2
    turin.refresh_from_db()
    assert turin.valid_to is None

    page.locator(f"#memory-{bees.pk} button", has_text="Forget").click()
    notice.locator(".undo-said", has_text="Forgotten").wait_for()
    page.locator("#count-memories", has_text="1").wait_for()
    # Dismissed (or left to run out), it goes for good and the receipt says what went.
    notice.locator(".undo-dismiss").click()
    page.locator("#forget-receipt", has_text="Forgot 1 memory.").wait_for()
    assert not notice.is_visible()
    assert not MemoryNode.objects.filter(pk=bees.pk).exists()
    assert page.locator("#count-memories").inner_text() == "1"


def test_a_forget_left_alone_goes_for_good_when_its_undo_runs_out(page, asgi_server, log_in, user):
    bees = services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    log_in("alice")
    page.goto(f"{asgi_server}/memory/")
    page.locator(f"#memory-{bees.pk} button", has_text="Forget").click()
    page.locator("#memory-undo .undo-said", has_text="Forgotten").wait_for()
    assert MemoryNode.objects.filter(pk=bees.pk).exists(), "kept while Undo is offered"

    page.locator("#forget-receipt", has_text="Forgot 1 memory.").wait_for(timeout=20_000)

    assert not page.locator("#memory-undo").is_visible()
    assert not MemoryNode.objects.filter(pk=bees.pk).exists()


@pytest.mark.parametrize(("viewport", "scheme"), SCREENS)
def test_the_facts_page_shows_each_relation_and_confidence_in_percent(
    page, asgi_server, log_in, user, viewport, scheme
):
    _, triple = _learnt(user, "Alice lives in Turin", "Turin")
    _screen(page, viewport, scheme)
    log_in("alice")
    page.goto(f"{asgi_server}/memory/knowledge")

    row = page.locator(f"#triple-{triple.pk}")
    assert row.locator(".triple-relation").inner_text() == "Lives in"
    assert row.locator(".confidence").inner_text() == "80%"
    relation = row.locator(".triple-relation").bounding_box()
    assert relation["width"] > 20 and relation["height"] > 10
    assert page.locator("#triples tbody tr").count() == 1


def _answered(user) -> tuple[Conversation, Message]:
    bees = services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    conversation = Conversation.objects.create(owner=user, title="Bees")
    question = Message.objects.create(
        conversation=conversation, role="user", content="How are my bees?", status="complete"
    )
    answer = Message.objects.create(
        conversation=conversation,
        role="assistant",
        reply_to=question,
        content="They are fine.",
        status="complete",
        trace={
            "memory": {
                "route": "fast",
                "memories": [
                    {"id": bees.pk, "score": 0.81, "components": {"text": 1.0, "vector": 0.2}}
                ],
                "timings_ms": {"embed": 3.2},
            },
            "spans": [{"name": "recall", "ms": 4.0, "start_ms": 0, "outcome": "ok"}],
            "history_messages": 1,
            "timings_ms": {"llm": 120.0},
        },
    )
    return conversation, answer


@pytest.mark.parametrize(("viewport", "scheme"), SCREENS)
def test_what_i_used_opens_on_memories_and_why_with_details_folded(
    page, asgi_server, log_in, user, viewport, scheme
):
    conversation, answer = _answered(user)
    _screen(page, viewport, scheme)
    log_in("alice")
    page.goto(f"{asgi_server}/c/{conversation.pk}/")
    panel = page.locator(f"#msg-{answer.pk} details.trace")
    page.click("[data-details-toggle]")

    panel.locator("> summary").click()

    used = panel.locator(".trace-memories li")
    used.first.wait_for()
    assert used.count() == 1
    assert "Alice keeps bees" in used.inner_text()
    assert panel.locator(".trace-why").inner_text() == "Matched your words “bees”"
    assert not panel.locator(".trace-spans").is_visible()
    assert not panel.locator(".trace-scores").is_visible()
    box = panel.locator(".trace-used").bounding_box()
    assert box["width"] > 150 and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
    _assert_scheme(page, f"#msg-{answer.pk} .trace-used", scheme)

    panel.locator("details.trace-details > summary").click()

    panel.locator(".trace-spans").wait_for(state="visible")
    assert panel.locator(".trace-spans li").count() == 1
    assert "(0.81)" in panel.locator(".trace-scores").inner_text()


@pytest.mark.parametrize(("viewport", "scheme"), SCREENS)
def test_a_rename_changes_the_header_without_a_reload(
    page, asgi_server, log_in, user, viewport, scheme
):
    conversation = Conversation.objects.create(owner=user, title="Hi My name is Laura I")
    _screen(page, viewport, scheme)
    log_in("alice")
    page.goto(f"{asgi_server}/c/{conversation.pk}/")
    page.evaluate("window.notReloaded = true")
    if viewport is PHONE:
        page.click(".sidebar-toggle")
    item = page.locator(f"#conv-{conversation.pk}")
    item.locator("summary").click()
    item.locator("input[name=title]").fill("Hi! My name is Laura.")
    item.locator("button", has_text="Rename").click()

    page.locator("#chat-title", has_text="Hi! My name is Laura.").wait_for()
    page.locator(f"#conv-{conversation.pk} .conv-link", has_text="Hi! My name is Laura.").wait_for()
    assert page.evaluate("window.notReloaded") is True
    expect(page).to_have_title("Hi! My name is Laura. · Thalamus")
    assert page.locator("#chat-title").count() == 1


@pytest.mark.parametrize(("viewport", "scheme"), SCREENS)
def test_the_sidebar_marks_api_conversations_and_filters_them(
    page, asgi_server, log_in, user, other_user, viewport, scheme
):
    for title in ("Bees", "Tea"):
        Conversation.objects.create(owner=user, title=title)
    for _ in range(3):
        conversation_create(user=user, title="From a script", via_api=True)
    conversation_create(user=other_user, title="Mallory's script", via_api=True)
    _screen(page, viewport, scheme)
    log_in("alice")
    page.goto(f"{asgi_server}/")
    if viewport is PHONE:
        page.click(".home-list-link")
    items = page.locator("#conv-list .conv-item")
    items.first.wait_for(state="visible")
    assert items.count() == 5
    assert page.locator("#conv-list .badge-api").count() == 3
    badge = page.locator("#conv-list .badge-api").first.bounding_box()
    assert badge["height"] < 24 and badge["width"] < 60
    labels = page.locator("#conv-filter label")
    assert labels.count() == 3
    boxes = [labels.nth(i).bounding_box() for i in range(3)]
    sidebar = page.locator("#sidebar").bounding_box()
    for left, right in zip(boxes, boxes[1:], strict=False):
        assert abs(left["y"] - right["y"]) < 1, "one row"
        assert left["x"] + left["width"] <= right["x"] + 1, "side by side, not overlapping"
    assert boxes[0]["x"] >= sidebar["x"] and boxes[2]["x"] + boxes[2]["width"] <= (
        sidebar["x"] + sidebar["width"] + 0.5
    )

    labels.filter(has_text="API").click()
    items.nth(3).wait_for(state="detached")
    assert items.count() == 3
    assert page.locator("#conv-list .badge-api").count() == 3

    labels.filter(has_text="Chats").click()
    items.nth(2).wait_for(state="detached")
    assert items.count() == 2
    assert page.locator("#conv-list .badge-api").count() == 0
    # The search keeps the filter, and the filter the search.
    page.fill("#sidebar input[type=search]", "Tea")
    items.nth(1).wait_for(state="detached")
    assert items.count() == 1 and "Tea" in items.first.inner_text()
    labels.filter(has_text="API").click()
    page.locator("#conv-list .conv-none").wait_for()
    assert items.count() == 0
    page.fill("#sidebar input[type=search]", "")
    items.nth(2).wait_for()
    assert items.count() == 3
    _assert_scheme(page, "#conv-filter label:has(input:checked)", scheme)
    _shoot(page, f"sidebar-filter-{viewport['width']}-{scheme}")
