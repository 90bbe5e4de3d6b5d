"""A user's abuse limits on the chat: a refused message starts nothing, streams are capped, the
recall's pools refuse a flood, and oversized websocket frames close the socket."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from apps.chat import admission, open_replies, services
from apps.chat.models import Conversation, Message
from apps.chat.stops import RUNNING
from apps.cognition import context
from apps.core.management.commands.up import web_command
from apps.core.models import RuntimeConfig
from apps.core.ports import free_port
from apps.core.services import runtime_config_save
from tests.chat.conftest import connect_socket

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def _embedding_requests(llm_stub) -> int:
    return sum(1 for r in llm_stub.requests if r["path"].endswith("/embeddings"))


async def _frames_until(communicator, *needles: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        frame = await communicator.receive_from(max(deadline - time.monotonic(), 0.1))
        if any(needle in frame for needle in needles):
            return frame


async def test_a_message_over_the_turn_limit_starts_no_embedding_and_saves_nothing(user, llm_stub):
    await sync_to_async(runtime_config_save)(config=RuntimeConfig(turns_per_minute=1))
    first = await Conversation.objects.acreate(owner=user)
    await sync_to_async(services.message_send)(conversation=first, content="hello")
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    before = _embedding_requests(llm_stub)

    await communicator.send_json_to({"action": "send", "content": "again, please"})
    frame = await communicator.receive_from(5)

    assert "You are sending messages too fast: at most 1 per minute. Try again in " in frame
    await asyncio.sleep(0.5)  # an embedding started anyway would have reached the stub by now
    assert _embedding_requests(llm_stub) == before
    assert not await conversation.messages.aexists()
    await communicator.disconnect()


async def test_a_users_streams_beyond_the_cap_are_refused_as_busy_and_save_nothing(
    user, llm_stub, settings
):
    settings.THALAMUS_STREAMS_PER_USER = 1
    llm_stub.script({"content": "A slow answer.", "ttft": 2.0})
    slow = await Conversation.objects.acreate(owner=user)
    other = await Conversation.objects.acreate(owner=user)
    streaming = await connect_socket(user, slow.pk)
    refused = await connect_socket(user, other.pk)
    await streaming.send_json_to({"action": "send", "content": "take your time"})
    await _frames_until(streaming, "msg-assistant")

    await refused.send_json_to({"action": "send", "content": "and this too"})
    frame = await refused.receive_from(5)

    assert "You already have 1 answer being written." in frame
    assert not await other.messages.aexists()
    await _frames_until(streaming, "msg-assistant complete")
    # The finished answer gives its slot back as its task ends.
    while RUNNING:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0)
    llm_stub.script({"content": "Now it is your turn."})
    await refused.send_json_to({"action": "send", "content": "and this too"})
    await _frames_until(refused, "msg-assistant complete")
    assert await other.messages.filter(status=Message.Status.COMPLETE).aexists()
    await streaming.disconnect()
    await refused.disconnect()


async def test_a_message_sent_the_moment_an_answer_ends_is_not_refused_as_busy(
    user, llm_stub, settings
):
    """The answer's stream slot is given back before the page hears that it ended, so a
    message sent at once on the next frame finds the slot free."""
    settings.THALAMUS_STREAMS_PER_USER = 1
    llm_stub.script({"content": "The first answer."}, {"content": "The second answer."})
    first = await Conversation.objects.acreate(owner=user)
    second = await Conversation.objects.acreate(owner=user)
    page = await connect_socket(user, first.pk)
    other_page = await connect_socket(user, second.pk)
    await page.send_json_to({"action": "send", "content": "first"})
    await _frames_until(page, "msg-assistant complete")

    await other_page.send_json_to({"action": "send", "content": "second, at once"})
    frame = await _frames_until(other_page, "msg-assistant complete", "chat-notice error")

    assert "answer being written" not in frame
    assert await second.messages.filter(status=Message.Status.COMPLETE).aexists()
    await page.disconnect()
    await other_page.disconnect()


async def test_a_full_recall_pool_refuses_a_message_as_busy_and_saves_nothing(user, llm_stub):
    release = threading.Event()
    held = []
    try:
        while True:
            held.append(context._EMBED_POOL.submit(release.wait, 30))
    except context.RecallBusy:
        pass
    try:
        assert len(held) == context._EMBED_POOL.capacity
        conversation = await Conversation.objects.acreate(owner=user)
        communicator = await connect_socket(user, conversation.pk)

        await communicator.send_json_to({"action": "send", "content": "hello"})
        frame = await communicator.receive_from(5)

        assert context.RECALL_BUSY in frame
        assert not await conversation.messages.aexists()
    finally:
        release.set()
    for future in held:
        future.result(5)
    # Drained, the pool takes the next message, and the refused one held no stream slot.
    llm_stub.script({"content": "Hello again."})
    await communicator.send_json_to({"action": "send", "content": "hello"})
    await _frames_until(communicator, "msg-assistant complete")
    await communicator.disconnect()


def test_a_bounded_pool_refuses_work_beyond_its_capacity_then_takes_it_again():
    pool = context.BoundedPool(1, queue=1, thread_name_prefix="test-bounded")
    release = threading.Event()
    running, queued = pool.submit(release.wait, 5), pool.submit(release.wait, 5)
    with pytest.raises(context.RecallBusy):
        pool.submit(release.wait, 5)
    release.set()
    assert running.result(5) and queued.result(5)
    assert pool.submit(lambda: 42).result(5) == 42
    pool.shutdown()


async def test_a_frame_over_the_limit_closes_the_socket_with_1009(user, settings):
    settings.THALAMUS_WS_MAX_BYTES = 64 * 1024
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)

    await communicator.send_to(text_data='{"action": "send", "content": "' + "x" * 70_000 + '"}')

    assert await communicator.receive_output(5) == {"type": "websocket.close", "code": 1009}
    assert not await conversation.messages.aexists()


def test_up_serves_websockets_that_refuse_a_frame_over_the_limit_with_1009(user, settings):
    # The server `manage.py up` starts, on the test database: uvicorn itself closes the socket.
    settings.THALAMUS_WS_MAX_BYTES = 64 * 1024
    conversation = Conversation.objects.create(owner=user)
    client = Client()
    client.force_login(user)
    db = settings.DATABASES["default"]
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}&port={db['PORT']}"
        ),
        "REDIS_URL": settings.REDIS_URL,
    }
    process = subprocess.Popen(web_command("127.0.0.1", port), cwd=ROOT, env=env)
    url = f"ws://127.0.0.1:{port}/ws/c/{conversation.pk}/"
    headers = {
        "Cookie": f"sessionid={client.cookies['sessionid'].value}",
        "Origin": f"http://127.0.0.1:{port}",
    }
    try:
        socket = None
        deadline = time.monotonic() + 30
        while socket is None:
            try:
                socket = connect(url, additional_headers=headers, max_size=None)
            except OSError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.2)
        with socket, pytest.raises(ConnectionClosed) as closed:
            socket.send('{"action": "send", "content": "' + "x" * 70_000 + '"}')
            socket.recv(10)
        assert closed.value.rcvd.code == 1009
        assert not Message.objects.filter(conversation=conversation).exists()
    finally:
        process.terminate()
        process.wait(10)


async def _failed_reply(user) -> Message:
    conversation = await Conversation.objects.acreate(owner=user)
    sent = await sync_to_async(services.message_send)(conversation=conversation, content="hello")
    return await sync_to_async(open_replies.message_fail_open)(reply_id=sent.reply.pk, error="boom")


async def test_a_retry_beyond_the_users_streams_is_refused_and_leaves_the_reply_failed(
    user, llm_stub, settings
):
    settings.THALAMUS_STREAMS_PER_USER = 1
    failed = await _failed_reply(user)
    held = await sync_to_async(admission.turn_admit)(
        user_id=user.pk, config=RuntimeConfig(), new_turn=False
    )
    communicator = await connect_socket(user, failed.conversation_id)

    await communicator.send_json_to({"action": "retry", "message_id": failed.pk})
    frame = await communicator.receive_from(5)

    assert "You already have 1 answer being written." in frame
    await failed.arefresh_from_db()
    assert failed.status == Message.Status.FAILED
    await sync_to_async(admission.stream_slot_release)(user_id=user.pk, slot=held)
    await communicator.disconnect()


async def test_a_retry_is_not_held_back_by_the_turn_limit(user, llm_stub):
    await sync_to_async(runtime_config_save)(config=RuntimeConfig(turns_per_minute=1))
    failed = await _failed_reply(user)
    llm_stub.script({"content": "Second time lucky."})
    communicator = await connect_socket(user, failed.conversation_id)

    await communicator.send_json_to({"action": "retry", "message_id": failed.pk})
    await _frames_until(communicator, "msg-assistant complete")

    await failed.arefresh_from_db()
    assert failed.content == "Second time lucky."
    await communicator.disconnect()


@pytest.mark.django_db
def test_without_redis_a_turn_is_admitted_with_no_slot_and_nothing_raises(user, settings, tmp_path):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"unix://{tmp_path}/nothing.sock",
        }
    }
    slot = admission.turn_admit(user_id=user.pk, config=RuntimeConfig())
    assert slot == ""
    admission.stream_slot_release(user_id=user.pk, slot=slot)
