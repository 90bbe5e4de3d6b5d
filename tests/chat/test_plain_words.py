"""The chat page in plain words: what memory does here is said before the first message."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.accounts.services import user_settings_update
from apps.chat.broadcasts import render_new_messages
from apps.chat.models import Conversation, Message
from apps.memory.models import MemoryNode

pytestmark = pytest.mark.django_db


def test_a_memory_off_chat_says_so_above_the_composer_before_the_first_message(alice, user):
    conversation = Conversation.objects.create(owner=user)
    url = reverse("chat:conversation", args=[conversation.pk])
    assert 'id="memory-off-note"' not in alice.get(url).content.decode()

    user_settings_update(user=user, memory_enabled=False)
    body = alice.get(url).content.decode()
    assert 'id="memory-off-note"' in body
    assert "Memory is off: nothing you say here is remembered." in body
    assert 'id="memory-off-note"' in alice.get(reverse("home")).content.decode()


def test_a_temporary_chat_needs_no_memory_off_note(alice, user):
    user_settings_update(user=user, memory_enabled=False)
    conversation = Conversation.objects.create(owner=user, temporary=True)
    body = alice.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert 'id="memory-off-note"' not in body


def test_the_empty_chat_line_is_always_on_the_page_for_each_push_to_hide(alice, user):
    conversation = Conversation.objects.create(owner=user)
    message = Message.objects.create(conversation=conversation, role="user", content="hi")
    body = alice.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert '<p id="chat-empty" class="empty-state" hidden>' in body
    pushed = render_new_messages([message])
    # Swapped, never deleted: a delete finds no target from the second message on (an error).
    assert 'id="chat-empty" class="empty-state" hx-swap-oob="true" hidden' in pushed
    assert "delete" not in pushed.split('id="messages"')[0]


def _answer_using(conversation, node) -> Message:
    asked = Message.objects.create(conversation=conversation, role="user", content="Hi")
    return Message.objects.create(
        conversation=conversation,
        role="assistant",
        status="complete",
        content="An answer.",
        reply_to=asked,
        trace={"memory": {"memories": [{"id": node.pk, "score": 0.5}]}},
    )


def test_a_receipts_confirm_says_that_it_worked_in_a_notice_that_goes_by_itself(alice, user):
    conversation = Conversation.objects.create(owner=user)
    tea = MemoryNode.objects.create(owner=user, description="The user likes tea")
    reply = _answer_using(conversation, tea)

    html = alice.post(
        f"/c/{conversation.pk}/memories/{tea.pk}/confirm",
        {"message_id": reply.pk},
        HTTP_HX_REQUEST="true",
    ).content.decode()

    receipt, notice = html.split('id="memory-undo"')
    assert f'id="receipt-{reply.pk}"' in receipt
    assert 'hx-swap-oob="true"' in notice and 'data-seconds="6"' in notice
    assert "<strong>Confirmed</strong>" in notice
    assert 'class="btn btn-sm btn-ghost undo-dismiss" aria-label="Dismiss"' in notice


def test_a_receipt_counts_a_fact_once_and_shows_no_instruction_as_a_fact(alice, user):
    from apps.memory import graph_services

    conversation = Conversation.objects.create(owner=user)
    ghent = MemoryNode.objects.create(owner=user, description="The user lives in Ghent")
    tea = MemoryNode.objects.create(owner=user, description="The user likes green tea")
    lives = graph_services.triple_upsert(
        owner=user, subject="user", predicate="lives_in", object="Ghent"
    )
    cat = graph_services.triple_upsert(
        owner=user, subject="user", predicate="has_pet", object="a cat named Miso"
    )
    rule = MemoryNode.objects.create(
        owner=None, kind="rule", description="When a memory contradicts the user, trust the user"
    )
    boils = MemoryNode.objects.create(owner=None, description="Water boils at 100 °C")
    reply = _answer_using(conversation, ghent)
    reply.trace["memory"]["memories"] += [
        {"id": node.pk, "score": 0.4} for node in (tea, rule, boils)
    ]
    reply.trace["memory"]["triples"] = [{"id": t.pk, "category": "places"} for t in (lives, cat)]
    reply.save()

    page = alice.get(f"/c/{conversation.pk}/").content.decode()
    receipt = page.split(f'id="receipt-{reply.pk}"')[1].split("</details>")[0]

    # Ghent once (its fact restates the memory), the tea, the cat; one shared fact, no rule.
    assert "used 3 memories · 1 shared fact" in receipt
    assert receipt.count("Ghent") == 1 and "Miso" in receipt
    assert "Water boils" in receipt and "trust the user" not in receipt


def test_every_notice_has_a_close_button_and_the_chats_goes_by_itself(alice, user):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from apps.chat.broadcasts import render_error, render_notice

    notice = render_notice("Deleted.")
    assert 'data-seconds="12"' in notice and "data-close-notice" in notice
    assert "data-close-notice" in render_error("That failed.")
    # The messages a redirect carries (here an import's warning) close too.
    upload = SimpleUploadedFile("x.json", b'{"model": "gpt-4"}', "application/json")
    body = alice.post(reverse("memory:import"), {"file": upload}, follow=True).content.decode()
    said = body.split('<ul class="messages">')[1].split("</ul>")[0]
    assert "not a memory export" in said and "data-close-notice" in said
