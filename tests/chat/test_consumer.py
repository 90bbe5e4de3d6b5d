"""The chat websocket with the real channel layer, database and the LLM stub over HTTP."""

from __future__ import annotations

import asyncio
import logging

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.core.cache import cache
from django.test import AsyncClient, Client

from apps.chat.models import Conversation, Message
from apps.chat.routing import websocket_urlpatterns
from tests.chat.conftest import connect_socket, receive_until, send_action

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user)


def _stop_once_published(monkeypatch, conversation, needle: str, *, swallow=False) -> list[int]:
    """Land a Stop on the generating reply right after a fragment with `needle` is published.

    With `swallow`, the publish then loses the CancelledError, as Python 3.11's wait_for does
    when a cancel meets a write that is just finishing. Returns the ids of the replies stopped.
    """
    from channels.layers import get_channel_layer

    from apps.chat import stops

    layer = get_channel_layer()
    publish = layer.group_send
    stopped: list[int] = []

    async def group_send(group, message):
        await publish(group, message)
        if stopped or needle not in message.get("html", ""):
            return
        (reply_id,) = stops.RUNNING
        assert stops.reply_cancel_here(reply_id=reply_id, conversation_id=conversation.pk)
        stopped.append(reply_id)
        if swallow:
            with pytest.raises(asyncio.CancelledError):  # it reached this very task
                await asyncio.sleep(0)

    monkeypatch.setattr(layer, "group_send", group_send)
    return stopped


async def test_an_answer_streams_and_is_saved_with_its_timings(user, conversation, llm_stub):
    llm_stub.script({"content": "one two three four five six", "tps": 100})
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="count for me")
    frames = await receive_until(communicator, "msg-assistant complete")
    assert any('class="md-src"' in f and "one two" in f for f in frames), "no streamed text"
    assert any("Thalamus is answering" in f for f in frames), "composer was not disabled"
    reply = await Message.objects.aget(role="assistant")
    assert reply.content == "one two three four five six"
    assert reply.completion_tokens == 6 and reply.prompt_tokens > 0
    assert reply.ttft_ms is not None and reply.latency_ms >= reply.ttft_ms
    assert reply.trace["timings_ms"]["llm"] > 0
    sent = llm_stub.requests[-1]["body"]
    assert reply.model == sent["model"] == settings.THALAMUS_CHAT_MODEL
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][-1] == {"role": "user", "content": "count for me"}
    # The message was embedded once, for the memory recall, before the answer was asked for.
    paths = [r["path"] for r in llm_stub.requests]
    assert paths.count("/v1/embeddings") == 1
    assert paths.index("/v1/embeddings") < paths.index("/v1/chat/completions")
    embedded = next(r for r in llm_stub.requests if r["path"] == "/v1/embeddings")
    assert embedded["body"]["input"] == ["count for me"]
    await communicator.disconnect()


async def test_stop_cancels_and_keeps_the_partial_answer(user, conversation, llm_stub):
    llm_stub.script({"content": "tick " * 300, "tps": 50})
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="go on")
    await receive_until(communicator, "tick tick")
    reply = await Message.objects.aget(role="assistant")
    await send_action(communicator, action="stop", message_id=reply.pk)
    await receive_until(communicator, "msg-assistant cancelled")
    await reply.arefresh_from_db()
    assert reply.status == "cancelled" and 0 < reply.content.count("tick") < 300

    # A stopped answer can be regenerated, as a failed one can.
    llm_stub.script({"content": "all of it"})
    await send_action(communicator, action="retry", message_id=reply.pk)
    await receive_until(communicator, "msg-assistant complete")
    await reply.arefresh_from_db()
    assert (reply.status, reply.content) == ("complete", "all of it")
    await communicator.disconnect()


@pytest.mark.parametrize(
    ("fault", "sentence"),
    [
        ("http_500", "returned an error (HTTP 500)"),
        ("drop", "cut off before it finished"),
    ],
)
async def test_a_failing_llm_marks_the_reply_failed_and_the_next_message_works(
    user, conversation, llm_stub, fault, sentence
):
    llm_stub.script({"fault": fault, "content": "partial words here " * 20})
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="first")
    frames = await receive_until(communicator, "msg-assistant failed")
    assert sentence in frames[-1] and "Retry" in frames[-1]
    failed = await Message.objects.aget(role="assistant")
    assert failed.status == "failed" and sentence in failed.error

    llm_stub.script({"content": "all good"})
    await send_action(communicator, content="second")
    await receive_until(communicator, "msg-assistant complete")
    assert await Message.objects.filter(role="user").acount() == 2
    await communicator.disconnect()


async def test_an_unreachable_llm_fails_with_one_sentence(user, conversation, settings):
    settings.THALAMUS_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="anyone there?")
    frames = await receive_until(communicator, "msg-assistant failed")
    assert "could not be reached" in frames[-1]
    assert await Message.objects.filter(role="user", content="anyone there?").aexists()
    await communicator.disconnect()


async def test_a_slow_llm_times_out_and_is_reported(user, conversation, llm_stub, settings):
    settings.THALAMUS_LLM_TIMEOUT = 0.5
    llm_stub.script({"fault": "hang", "ttft": 5})
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="slowly")
    frames = await receive_until(communicator, "msg-assistant failed")
    assert "took too long" in frames[-1]
    await communicator.disconnect()


async def test_retry_regenerates_a_failed_answer(user, conversation, llm_stub):
    llm_stub.script({"fault": "http_500"}, {"content": "second time lucky"})
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="try")
    await receive_until(communicator, "msg-assistant failed")
    reply = await Message.objects.aget(role="assistant")
    await send_action(communicator, action="retry", message_id=reply.pk)
    await receive_until(communicator, "msg-assistant complete")
    await reply.arefresh_from_db()
    assert (reply.status, reply.content, reply.error) == ("complete", "second time lucky", "")
    await communicator.disconnect()


async def test_an_empty_message_is_refused_with_a_sentence(user, conversation):
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="   ")
    frame = await communicator.receive_from(5)
    assert "Type a message first." in frame
    assert not await Message.objects.aexists()
    await communicator.disconnect()


async def test_another_users_conversation_closes_the_socket(other_user, conversation):
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/c/{conversation.pk}/"
    )
    communicator.scope["user"] = other_user
    connected, code = await communicator.connect()
    assert not connected and code == 4404


async def test_an_anonymous_socket_is_closed(conversation):
    from django.contrib.auth.models import AnonymousUser

    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/c/{conversation.pk}/"
    )
    communicator.scope["user"] = AnonymousUser()
    connected, code = await communicator.connect()
    assert not connected and code == 4401


async def test_another_user_never_receives_the_stream(user, other_user, llm_stub):
    mine = await sync_to_async(Conversation.objects.create)(owner=user)
    theirs = await sync_to_async(Conversation.objects.create)(owner=other_user)
    spy = await connect_socket(other_user, theirs.pk)
    communicator = await connect_socket(user, mine.pk)
    llm_stub.script({"content": "secret plans"})
    await send_action(communicator, content="my secret")
    await receive_until(communicator, "msg-assistant complete")
    assert await spy.receive_nothing(0.5)
    await spy.disconnect()
    await communicator.disconnect()


async def test_a_stop_from_another_users_socket_never_cancels_my_answer(user, other_user, llm_stub):
    mine = await sync_to_async(Conversation.objects.create)(owner=user)
    theirs = await sync_to_async(Conversation.objects.create)(owner=other_user)
    llm_stub.script({"content": "tick " * 40, "tps": 40})
    communicator = await connect_socket(user, mine.pk)
    attacker = await connect_socket(other_user, theirs.pk)
    await send_action(communicator, content="go on")
    await receive_until(communicator, "tick tick")
    reply = await Message.objects.aget(role="assistant")

    await send_action(attacker, action="stop", message_id=reply.pk)  # my reply's id, their socket

    await receive_until(communicator, "msg-assistant complete")
    await reply.arefresh_from_db()
    assert reply.status == "complete" and reply.content.count("tick") == 40
    await attacker.disconnect()
    await communicator.disconnect()


async def test_a_retry_from_another_users_socket_never_touches_my_answer(
    user, other_user, llm_stub
):
    mine = await sync_to_async(Conversation.objects.create)(owner=user)
    theirs = await sync_to_async(Conversation.objects.create)(owner=other_user)
    llm_stub.script({"fault": "http_500"})
    communicator = await connect_socket(user, mine.pk)
    await send_action(communicator, content="private question")
    await receive_until(communicator, "msg-assistant failed")
    reply = await Message.objects.aget(role="assistant")
    attacker = await connect_socket(other_user, theirs.pk)
    asked_before = len(llm_stub.requests)

    await send_action(attacker, action="retry", message_id=reply.pk)  # my reply's id, their socket

    assert await attacker.receive_nothing(0.5)
    assert await communicator.receive_nothing(0.2)
    await reply.arefresh_from_db()
    assert reply.status == "failed" and len(llm_stub.requests) == asked_before
    await attacker.disconnect()
    await communicator.disconnect()


async def test_a_socket_from_another_sites_page_is_refused(user, conversation):
    from thalamus_site.asgi import application

    client = Client()
    await sync_to_async(client.force_login)(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def opened_from(origin: bytes) -> bool:
        communicator = WebsocketCommunicator(
            application,
            f"/ws/c/{conversation.pk}/",
            headers=[(b"origin", origin), (b"cookie", cookie), (b"host", b"testserver")],
        )
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return connected

    assert await opened_from(b"http://testserver"), "the user's own page connects"
    # A page on another site would open it with the user's cookies: its origin gives it away.
    assert not await opened_from(b"https://evil.example")


async def test_the_reply_trace_shows_the_memories_used(user, conversation, llm_stub):
    from apps.memory import services as memory_services

    await sync_to_async(memory_services.memory_node_create)(
        owner=user,
        description="Alice keeps bees on her balcony",
        kind="fact",
        topic="hobbies",
        source="admin",
    )
    llm_stub.script({"content": "Your bees are fine."})
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="how are my bees on the balcony?")
    frames = await receive_until(communicator, "msg-assistant complete")
    assert "What I used" in frames[-1] and "Alice keeps bees on her balcony" in frames[-1]
    # The pushed panel is drawn when opened: its URL gives the memories the answer used.
    reply = await Message.objects.filter(role="assistant").alast()
    url = f"/c/{conversation.pk}/messages/{reply.pk}/used"
    assert f'hx-get="{url}"' in frames[-1]
    client = AsyncClient()
    await client.aforce_login(user)
    panel = (await client.get(url, headers={"hx-request": "true"})).content.decode()
    assert "What I remembered" in panel and "Alice keeps bees on her balcony" in panel
    # Why, in words, from the answer's own trace.
    assert "Matched your words “bees”, “balcony”" in panel
    message = llm_stub.requests[-1]["body"]["messages"][-1]["content"]
    assert "Alice keeps bees on her balcony" in message, "in the note before the message"
    await communicator.disconnect()


async def test_the_pushed_receipt_and_status_line_count_the_same_memories(
    user, conversation, llm_stub
):
    from apps.memory import services as memory_services

    await sync_to_async(memory_services.memory_node_create)(
        owner=user,
        description="Alice keeps bees on her balcony",
        kind="fact",
        topic="hobbies",
        source="admin",
    )
    await sync_to_async(memory_services.memory_node_create)(
        owner=None,
        description="Bees sleep in the hive at night",
        kind="fact",
        topic="bees",
        source="admin",
    )
    llm_stub.script({"content": "Your bees are asleep."})
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="where are my bees on the balcony at night?")
    frames = await receive_until(communicator, "msg-assistant complete")
    reply = await Message.objects.filter(role="assistant").alast()
    memory = reply.trace["memory"]
    own = sum(not item["global"] for item in memory["memories"])
    shared = len(memory["memories"]) - own + sum(t["global"] for t in memory["triples"])
    own += len(memory["episodes"]) + sum(not t["global"] for t in memory["triples"])
    assert own >= 1 and shared >= 1, "both were recalled"
    memories = f"{own} memor{'y' if own == 1 else 'ies'}"
    facts = f"{shared} shared fact{'' if shared == 1 else 's'}"
    receipt = frames[-1].split('class="receipt-line">')[1].split("</span>")[0]
    status = frames[-1].split('data-subsystem="retrieval">')[1].split("</span>", 2)[1]
    assert receipt.startswith(f"used {memories} · {facts}")
    assert status.strip().startswith(f"{memories}, {facts}")
    assert f'data-subsystem="llm"><span class="turn-name">LLM</span> {reply.model}' in frames[-1]
    await communicator.disconnect()


async def test_a_temporary_chats_answer_says_nothing_is_learned_instead_of_queued(user, llm_stub):
    temporary = await Conversation.objects.acreate(owner=user, temporary=True)
    llm_stub.script({"content": "Noted, for now."})
    communicator = await connect_socket(user, temporary.pk)
    await send_action(communicator, content="my bees are called Ada and Bob")
    frames = await receive_until(communicator, "msg-assistant complete")
    assert "nothing is learned here" in frames[-1]
    assert "queued" not in frames[-1].split('data-subsystem="reflection"')[1].split("</p>")[0]
    await communicator.disconnect()


async def test_stop_on_a_reply_no_process_is_writing_fails_it_and_offers_retry(user, conversation):
    from datetime import timedelta

    from django.utils import timezone

    from apps.chat import open_replies, services

    # A reply left open by a web process that died mid-answer (no lease renews it).
    sent = await sync_to_async(services.message_send)(conversation=conversation, content="hi")
    await Message.objects.filter(pk=sent.reply.pk).aupdate(
        status="streaming", created_at=timezone.now() - timedelta(minutes=5)
    )
    await sync_to_async(cache.delete)(open_replies._lease_key(sent.reply.pk))
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, action="stop", message_id=sent.reply.pk)
    frames = await receive_until(communicator, "msg-assistant failed")
    assert open_replies.INTERRUPTED in frames[-1] and "Retry" in frames[-1]
    assert 'id="composer"' in frames[-1] and "Thalamus is answering" not in frames[-1]
    await communicator.disconnect()


async def test_stop_while_the_turn_is_prepared_cancels_before_asking_the_llm(
    user, conversation, llm_stub
):
    # The memory recall waits on a slow embedding; Stop lands before the answer is requested.
    llm_stub.script({"endpoint": "embeddings", "ttft": 3.0})
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="remember this?")
    await receive_until(communicator, "msg-user")
    reply = await Message.objects.aget(role="assistant")
    await send_action(communicator, action="stop", message_id=reply.pk)
    frames = await receive_until(communicator, "msg-assistant cancelled")
    assert "Something went wrong" not in frames[-1]
    await reply.arefresh_from_db()
    assert reply.status == "cancelled" and reply.error == "" and reply.content == ""
    assert not [r for r in llm_stub.requests if r["path"].endswith("/chat/completions")]
    await communicator.disconnect()


async def test_a_stop_whose_cancellation_is_lost_on_the_way_still_stops_the_answer(
    user, conversation, llm_stub, monkeypatch
):
    """Python 3.11's asyncio.wait_for, which redis-py writes through, returns the result and
    drops the CancelledError when a cancel meets a write that is just finishing (it failed CI
    once). Here the Stop lands exactly then: while a fragment is published, which swallows it."""
    llm_stub.script({"content": "tick " * 300, "tps": 50})
    swallowed = _stop_once_published(monkeypatch, conversation, "tick tick", swallow=True)
    communicator = await connect_socket(user, conversation.pk)
    # A second page of the conversation: the fragments are published for it (a page alone gets
    # them from its own socket only).
    watching = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="go on")
    await receive_until(communicator, "msg-assistant cancelled")
    reply = await Message.objects.aget(role="assistant")
    assert swallowed == [reply.pk]
    assert reply.status == "cancelled" and 0 < reply.content.count("tick") < 300
    await watching.disconnect()
    await communicator.disconnect()


async def test_a_finished_answer_starts_its_background_work(
    user, conversation, llm_stub, celery_worker, config
):
    """Reflection, the title and the memories' access marks are queued once the reply is shown."""
    from apps.memory import services as memory_services
    from apps.memory.models import MemoryNode

    # Reflection waits for the conversation to go quiet (20 s as shipped; tested elsewhere).
    await sync_to_async(config)(reflection_quiet_seconds=1)

    used = await sync_to_async(memory_services.memory_node_create)(
        owner=user,
        description="Alice keeps bees on her balcony",
        kind="fact",
        topic="hobbies",
        source="admin",
    )
    llm_stub.script({"content": "Your bees are fine.", "match": "You are Thalamus"})
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="how are my bees on the balcony?")
    await receive_until(communicator, "msg-assistant complete")

    def background_done() -> bool:
        bodies = [str(r["body"]) for r in llm_stub.requests]
        return (
            Conversation.objects.get(pk=conversation.pk).title != ""
            and MemoryNode.objects.get(pk=used.pk).last_accessed_at is not None
            and any("word for word" in body for body in bodies)
        )

    async with asyncio.timeout(45):  # background work, which a loaded machine slows
        while not await sync_to_async(background_done)():
            await asyncio.sleep(0.1)
    await communicator.disconnect()


async def test_a_stop_landing_as_the_finished_reply_is_shown_still_starts_reflection(
    user, conversation, llm_stub, celery_worker, monkeypatch, config
):
    await sync_to_async(config)(reflection_quiet_seconds=1)
    llm_stub.script({"content": "All done.", "match": "You are Thalamus"})
    stopped = _stop_once_published(monkeypatch, conversation, "msg-assistant complete")
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="finish this")
    await receive_until(communicator, "msg-assistant complete")
    # This page gets the fragment directly, before it is published to the others: the Stop
    # lands in the publish, which may still be on its way.
    async with asyncio.timeout(10):
        while not stopped:
            await asyncio.sleep(0.02)
    reply = await Message.objects.aget(role="assistant")
    assert stopped == [reply.pk] and reply.status == "complete"

    async with asyncio.timeout(45):  # background work, which a loaded machine slows
        while not any("word for word" in str(r["body"]) for r in llm_stub.requests):
            await asyncio.sleep(0.1)
    await communicator.disconnect()


async def test_an_answer_stopped_at_its_cap_is_kept_and_continue_writes_on_in_it(
    user, conversation, llm_stub
):
    llm_stub.script(
        {"content": "The first part of a long story,", "finish_reason": "length"},
        {"content": "and then the end."},
    )
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="tell me a long story")
    frames = await receive_until(communicator, "msg-assistant complete")
    assert "Stopped at 7 tokens." in frames[-1] and 'value="continue"' in frames[-1]
    reply = await Message.objects.aget(role="assistant")
    assert (reply.content, reply.finish_reason) == ("The first part of a long story,", "length")

    await send_action(communicator, action="continue", message_id=reply.pk)
    frames = await receive_until(communicator, "msg-assistant complete")
    streamed = [f for f in frames if 'class="md-src"' in f and "and then" in f]
    assert streamed and "The first part of a long story, and then" in streamed[0]
    await reply.arefresh_from_db()
    assert reply.content == "The first part of a long story, and then the end."
    assert (reply.status, reply.finish_reason, reply.completion_tokens) == ("complete", "stop", 11)
    assert "Stopped at" not in frames[-1] and 'value="continue"' not in frames[-1]
    assert await Message.objects.acount() == 2
    # Asked as the usual turn, then the answer so far and the request to write on from it.
    sent = llm_stub.requests[-1]["body"]["messages"]
    assert sent[-3] == {"role": "user", "content": "tell me a long story"}
    assert sent[-2] == {"role": "assistant", "content": "The first part of a long story,"}
    assert sent[-1]["role"] == "user" and "where it stopped" in sent[-1]["content"]
    await communicator.disconnect()


async def test_a_continuation_that_fails_keeps_the_text_before_it(user, conversation, llm_stub):
    llm_stub.script(
        {"content": "Kept words.", "finish_reason": "length"},
        {"fault": "http_500"},
    )
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="go")
    await receive_until(communicator, "msg-assistant complete")
    reply = await Message.objects.aget(role="assistant")
    await send_action(communicator, action="continue", message_id=reply.pk)
    frames = await receive_until(communicator, "msg-assistant failed")
    assert "returned an error (HTTP 500)" in frames[-1] and "Kept words." in frames[-1]
    assert 'value="retry"' in frames[-1] and 'value="continue"' in frames[-1]
    await reply.arefresh_from_db()
    assert (reply.status, reply.content) == ("failed", "Kept words.")
    await communicator.disconnect()


async def test_an_answer_repeating_itself_is_cut_and_marked(user, conversation, llm_stub, caplog):
    caplog.set_level(logging.INFO, logger="thalamus.llm_stub")
    line = "I will now repeat this sentence again.\n"
    llm_stub.script({"content": "Sure.\n" + line * 200, "tps": 200})
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="say something")
    frames = await receive_until(communicator, "msg-assistant complete")
    assert "Stopped: the model began repeating itself." in frames[-1]
    assert 'value="continue"' in frames[-1]
    reply = await Message.objects.aget(role="assistant")
    assert (reply.content, reply.finish_reason) == ("Sure.\n" + line, "loop")
    # The stream was closed, which frees a local server's one slot at once.
    async with asyncio.timeout(5):
        while not any("client gone" in r.getMessage() for r in caplog.records):
            await asyncio.sleep(0.05)
    await communicator.disconnect()


async def test_a_continue_from_another_users_socket_never_touches_my_answer(
    user, other_user, llm_stub
):
    mine = await sync_to_async(Conversation.objects.create)(owner=user)
    theirs = await sync_to_async(Conversation.objects.create)(owner=other_user)
    llm_stub.script({"content": "Half of my private answer", "finish_reason": "length"})
    communicator = await connect_socket(user, mine.pk)
    await send_action(communicator, content="private question")
    await receive_until(communicator, "msg-assistant complete")
    reply = await Message.objects.aget(role="assistant")
    attacker = await connect_socket(other_user, theirs.pk)
    asked_before = len(llm_stub.requests)

    # My reply's id, their socket.
    await send_action(attacker, action="continue", message_id=reply.pk)

    assert await attacker.receive_nothing(0.5)
    assert await communicator.receive_nothing(0.2)
    await reply.arefresh_from_db()
    assert (reply.status, reply.finish_reason) == ("complete", "length")
    assert len(llm_stub.requests) == asked_before
    await attacker.disconnect()
    await communicator.disconnect()
