"""Limits on a turn: an empty or too long message, and too many messages a minute."""

from __future__ import annotations

import tempfile
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone

from apps.chat import services
from apps.chat.errors import ChatRateLimited
from apps.chat.models import Conversation, Message
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config
from apps.core.services import runtime_config_save
from tests.chat.conftest import connect_socket

pytestmark = pytest.mark.django_db


def _configure(**fields) -> None:
    runtime_config_save(config=RuntimeConfig(**fields))


def _send_in_a_new_conversation(user, content: str = "hello"):
    conversation = Conversation.objects.create(owner=user)
    return services.message_send(conversation=conversation, content=content)


@pytest.mark.parametrize("content", ["", "   \n\t "])
def test_an_empty_message_is_refused_and_nothing_is_saved(user, content):
    conversation = Conversation.objects.create(owner=user)
    with pytest.raises(services.ChatError, match="^Type a message first.$"):
        services.message_send(conversation=conversation, content=content)
    assert not Message.objects.exists()


def test_a_message_over_the_default_limit_is_refused_with_its_length_and_nothing_is_saved(user):
    conversation = Conversation.objects.create(owner=user)
    with pytest.raises(services.ChatError) as caught:
        services.message_send(conversation=conversation, content="x" * 40_123)
    assert str(caught.value) == "Your message is 40,123 characters long; the limit is 32,000."
    assert not isinstance(caught.value, ChatRateLimited)
    assert not Message.objects.exists()

    user_message = services.message_send(conversation=conversation, content="x" * 32_000).question
    assert len(user_message.content) == 32_000


def test_the_size_limit_follows_the_runtime_configuration(user):
    _configure(max_message_chars=10)
    conversation = Conversation.objects.create(owner=user)
    with pytest.raises(services.ChatError, match="is 11 characters long; the limit is 10"):
        services.message_send(conversation=conversation, content="  elevenchars  ")
    assert not Message.objects.exists()
    services.message_send(conversation=conversation, content="  ten chars  ")
    assert Message.objects.get(role="user").content == "ten chars"


def test_too_many_turns_a_minute_are_refused_with_when_to_retry(user, other_user):
    _configure(turns_per_minute=3)
    turns = [_send_in_a_new_conversation(user)[0] for _ in range(3)]
    now = timezone.now()
    for turn, age in zip(turns, [48, 30, 10], strict=True):
        Message.objects.filter(pk=turn.pk).update(created_at=now - timedelta(seconds=age))

    conversation = Conversation.objects.create(owner=user)
    with pytest.raises(ChatRateLimited) as caught:
        services.message_send(conversation=conversation, content="one more")
    assert caught.value.retry_after == 12
    assert str(caught.value) == (
        "You are sending messages too fast: at most 3 per minute. Try again in 12 seconds."
    )
    assert not conversation.messages.exists()
    assert Message.objects.filter(role="user").count() == 3

    # Another user has a limit of their own.
    _send_in_a_new_conversation(other_user)

    # A minute after the oldest turn, the next one is allowed.
    Message.objects.filter(pk=turns[0].pk).update(created_at=now - timedelta(seconds=61))
    services.message_send(conversation=conversation, content="one more")
    assert conversation.messages.filter(role="user").count() == 1


def test_retrying_a_failed_answer_is_not_a_new_turn(user):
    _configure(turns_per_minute=1)
    reply = _send_in_a_new_conversation(user).reply
    services.message_finish(message=reply, status=Message.Status.FAILED, content="", error="x")

    retried = services.message_retry(message=reply)
    assert retried.status == Message.Status.PENDING
    with pytest.raises(ChatRateLimited, match="at most 1 per minute"):
        _send_in_a_new_conversation(user)
    assert Message.objects.filter(role="user").count() == 1


def test_zero_turns_per_minute_means_no_limit(user):
    _configure(turns_per_minute=0)
    for _ in range(25):
        _send_in_a_new_conversation(user)
    assert Message.objects.filter(role="user").count() == 25


def test_a_turn_is_saved_by_one_statement_with_its_checks(user):
    from psycopg.pq import Trace

    def statements_of_a_turn() -> list[str]:
        conversation = Conversation.objects.create(owner=user)
        runtime_config()  # cached, as between turns
        # What goes over the wire, as libpq traces it: a statement is a Bind (extended
        # protocol) or a Query (simple protocol) message.
        with tempfile.TemporaryFile("w+") as trace:
            pgconn = connection.connection.pgconn
            pgconn.trace(trace.fileno())
            pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)
            try:
                services.message_send(conversation=conversation, content="hi", history=10)
            finally:
                pgconn.untrace()
            trace.seek(0)
            sent = [
                line
                for line in trace.read().splitlines()
                if line.startswith("F") and ("\tBind\t" in line or "\tQuery\t" in line)
            ]
        # Inside the test's transaction, a savepoint wraps it.
        return [line for line in sent if "SAVEPOINT" not in line]

    _configure(turns_per_minute=0)
    assert len(statements_of_a_turn()) == 1
    _configure(turns_per_minute=100)
    assert len(statements_of_a_turn()) == 1
    assert Message.objects.filter(role="user").count() == 2


def test_the_admin_validates_the_limits():
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as caught:
        RuntimeConfig(max_message_chars=0, turns_per_minute=5000).full_clean()
    assert set(caught.value.message_dict) == {"max_message_chars", "turns_per_minute"}
    RuntimeConfig(max_message_chars=1, turns_per_minute=0).full_clean()


def test_the_composer_stops_a_too_long_message_in_the_browser(client, user):
    client.force_login(user)
    conversation = Conversation.objects.create(owner=user)
    assert 'maxlength="32000"' in client.get(f"/c/{conversation.pk}/").content.decode()
    _configure(max_message_chars=500)
    assert 'maxlength="500"' in client.get(f"/c/{conversation.pk}/").content.decode()


def test_without_javascript_a_too_long_message_shows_the_sentence(client, user):
    client.force_login(user)
    conversation = Conversation.objects.create(owner=user)
    response = client.post(f"/c/{conversation.pk}/send", {"content": "y" * 32_001}, follow=True)
    assert "Your message is 32,001 characters long; the limit is 32,000." in (
        response.content.decode()
    )
    assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_shows_the_rate_limit_sentence_and_saves_nothing(user):
    await sync_to_async(_configure)(turns_per_minute=1)
    await sync_to_async(_send_in_a_new_conversation)(user)
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    await communicator.send_json_to({"action": "send", "content": "again"})
    frame = await communicator.receive_from(5)
    assert 'id="chat-notice"' in frame
    assert "You are sending messages too fast: at most 1 per minute. Try again in " in frame
    assert not await conversation.messages.aexists()
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_every_composer_a_turn_pushes_keeps_the_configured_limit(user, llm_stub, monkeypatch):
    # As in production: the ORM refuses to run on the event loop (the test settings allow it),
    # so the composer's limit must come from what the turn read in its threads.
    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE")
    await sync_to_async(_configure)(max_message_chars=500)
    llm_stub.script({"content": "Short answer."})
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    await communicator.send_json_to({"action": "send", "content": "hello"})
    composers = []
    while True:
        frame = await communicator.receive_from(10)
        if 'id="composer"' in frame:
            composers.append(frame)
        if "msg-assistant complete" in frame:
            break
    assert len(composers) == 2, "the busy composer and the re-enabled one"
    assert all('maxlength="500"' in frame for frame in composers)
    assert "disabled" in composers[0] and " disabled" not in composers[1].split("</textarea>")[0]
    await communicator.disconnect()


def test_a_message_with_crlf_newlines_is_measured_as_the_browser_counted_it(user):
    # A form post of a 32,000-character message with line breaks: the browser's maxlength counted
    # each as one character, the post carries each as CRLF.
    conversation = Conversation.objects.create(owner=user)
    typed = ("x" * 99 + "\n") * 320
    assert len(typed) == 32_000
    question = services.message_send(
        conversation=conversation, content=typed.replace("\n", "\r\n")
    ).question
    stored = Message.objects.get(pk=question.pk).content
    assert stored == typed.strip() and "\r" not in stored


@pytest.mark.django_db(transaction=True)
async def test_a_limit_raised_while_the_page_is_open_lets_the_longer_message_through(
    user, llm_stub
):
    # The socket recalls memory for a message before saving it only when it fits the limit the
    # socket last saw; one over that, under the new limit, is answered all the same.
    await sync_to_async(_configure)(max_message_chars=100)
    llm_stub.script({"content": "Read it all."})
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    await sync_to_async(_configure)(max_message_chars=1_000)
    await communicator.send_json_to({"action": "send", "content": "y" * 500})
    frame = ""
    while "msg-assistant complete" not in frame and "msg-assistant failed" not in frame:
        frame = await communicator.receive_from(10)
    assert "msg-assistant complete" in frame
    reply = await Message.objects.aget(role="assistant")
    assert reply.content == "Read it all." and "memory" in reply.trace
    assert llm_stub.requests[-1]["body"]["messages"][-1]["content"] == "y" * 500
    assert 'maxlength="1000"' in frame
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_finished_answer_that_used_memories_is_pushed_with_its_receipt(
    user, llm_stub, monkeypatch
):
    # As in production: the ORM refuses to run on the event loop, and the receipt of a finished
    # answer reads the memories it used.
    from apps.memory import services as memory_services

    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE")
    await sync_to_async(_configure)(max_message_chars=500)
    await sync_to_async(memory_services.memory_node_create)(
        owner=user, description="Alice keeps bees in Turin", source="admin"
    )
    llm_stub.script({"content": "Your bees are fine."})
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    await communicator.send_json_to({"action": "send", "content": "How are my bees in Turin?"})
    while True:
        frame = await communicator.receive_from(10)
        if "msg-assistant complete" in frame:
            break
    assert "used 1 memory" in frame and "Alice keeps bees in Turin" in frame
    await communicator.disconnect()
