"""A conversation's title is asked for once the user pauses, once (#38 item 4), and until it
lands the conversation is called by the user's first words: a real worker, the stub on one
slot, the chat's socket."""

from __future__ import annotations

import asyncio
import re

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from apps.chat import services
from apps.chat.models import Conversation
from tests.chat.conftest import connect_socket, receive_until, send_action

TITLE_PROMPT = "Write a short title"
# The quiet period the title waits for; the user of these tests writes again sooner.
QUIET = 2
TYPING = 0.5
SAID = "Hi! My name is Laura. I live in Lisbon and I love painting birds on Sundays."
FIRST_WORDS = "Hi! My name is Laura."


def _asked(llm_stub) -> list[str]:
    """What each chat request to the stub was, in the order they came: "title" or "answer"."""
    kinds = []
    for request in llm_stub.requests:
        if request["path"].endswith("/chat/completions"):
            asks_title = TITLE_PROMPT in request["body"]["messages"][-1]["content"]
            kinds.append("title" if asks_title else "answer")
    return kinds


async def _turn(communicator, text: str) -> list[str]:
    await send_action(communicator, action="send", content=text)
    return await receive_until(communicator, "msg-assistant complete", timeout=30)


async def _titled(conversation_id: int) -> str:
    async with asyncio.timeout(30):
        while not (title := (await Conversation.objects.aget(pk=conversation_id)).title):
            await asyncio.sleep(0.1)
    return title


@pytest.mark.django_db(transaction=True)
async def test_replies_in_a_row_then_quiet_ask_for_the_title_once_after_the_last(
    user, llm_stub, celery_worker, config
):
    await sync_to_async(config)(reflection_quiet_seconds=QUIET, reflection_enabled=False)
    llm_stub.set_defaults(slots=1)
    llm_stub.script({"content": "Painting birds in Lisbon", "match": TITLE_PROMPT})
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    for text in (SAID, "Which birds sit still long enough?", "And which paper for watercolours?"):
        await _turn(communicator, text)
        # The user reads the answer and writes again, sooner than the quiet period.
        await asyncio.sleep(TYPING)
    await communicator.disconnect()

    assert await _titled(conversation.pk) == "Painting birds in Lisbon"
    assert _asked(llm_stub) == ["answer", "answer", "answer", "title"]


@pytest.mark.django_db(transaction=True)
async def test_a_title_the_next_message_preempts_is_asked_again_once_quiet(
    user, llm_stub, celery_worker, config
):
    await sync_to_async(config)(
        reflection_quiet_seconds=QUIET, reflection_enabled=False, background_wait_seconds=30
    )
    llm_stub.set_defaults(slots=1)
    # The model reads the title's prompt for a while: the user writes again meanwhile.
    llm_stub.script(
        {"content": "Painting birds", "match": TITLE_PROMPT, "ttft": 3.0, "resend": True}
    )
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    await _turn(communicator, SAID)
    async with asyncio.timeout(QUIET + 15):
        while "title" not in _asked(llm_stub):
            await asyncio.sleep(0.05)
    await _turn(communicator, "Which birds sit still long enough?")
    await communicator.disconnect()

    assert await _titled(conversation.pk) == "Painting birds"
    # Given way to the answer, then asked again once the user paused after it.
    assert _asked(llm_stub) == ["answer", "title", "answer", "title"]


@pytest.mark.django_db(transaction=True)
async def test_a_title_waiting_on_a_reply_that_then_fails_is_still_asked_once(
    user, llm_stub, celery_worker, config
):
    await sync_to_async(config)(reflection_quiet_seconds=QUIET, reflection_enabled=False)
    llm_stub.script({"content": "Painting birds", "match": TITLE_PROMPT})
    # The second answer is still being written when the first reply's title task runs; then
    # its connection drops: a failed reply queues no title task of its own.
    llm_stub.script(
        {
            "content": "Sparrows and pigeons sit still for a long while.",
            "match": "sit still",
            "ttft": QUIET + 1,
            "fault": "drop",
        }
    )
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    await _turn(communicator, SAID)
    await send_action(communicator, action="send", content="Which birds sit still long enough?")
    await receive_until(communicator, "msg-error", timeout=30)
    await communicator.disconnect()

    assert await _titled(conversation.pk) == "Painting birds"
    assert _asked(llm_stub).count("title") == 1


@pytest.mark.django_db
def test_an_untitled_conversation_is_called_by_the_users_first_words(alice, user):
    untitled = Conversation.objects.create(owner=user)
    services.message_send(conversation=untitled, content=SAID)
    titled = Conversation.objects.create(owner=user, title="Trip to Rome")
    services.message_send(conversation=titled, content="Rome in May?")
    empty = Conversation.objects.create(owner=user)

    page = alice.get(reverse("chat:conversation", args=[untitled.pk])).content.decode()

    assert re.search(rf'id="chat-title">{re.escape(FIRST_WORDS)}</h1>', page)
    assert f"<title>{FIRST_WORDS} · Thalamus</title>" in page
    items = dict(re.findall(r'<li id="conv-(\d+)".*?class="conv-link">([^<]*)</a>', page, re.S))
    assert items == {
        str(untitled.pk): FIRST_WORDS,
        str(titled.pk): "Trip to Rome",
        str(empty.pk): "New conversation",
    }
    # Nothing is stored that would stand in the way of the model's title.
    untitled.refresh_from_db()
    assert untitled.title == ""


@pytest.mark.django_db(transaction=True)
async def test_the_first_message_names_the_conversation_on_its_pages_at_once(user, llm_stub):
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)

    first = "".join(await _turn(communicator, SAID))
    second = "".join(await _turn(communicator, "Which birds sit still long enough?"))
    await communicator.disconnect()

    assert re.search(rf'id="chat-title"[^>]*>{re.escape(FIRST_WORDS)}</h1>', first)
    assert f'data-tab-title="{FIRST_WORDS} · Thalamus"' in first
    item = re.search(rf'<li id="conv-{conversation.pk}".*?</li>', first, re.S)
    assert item and f">{FIRST_WORDS}</a>" in item.group(0)
    assert "chat-title" not in second, "named once, by the first message"
