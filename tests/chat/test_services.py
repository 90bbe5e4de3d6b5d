"""Chat services: one reply streams at a time in a conversation; a send is one statement."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.cache import cache
from django.utils import timezone

from apps.chat import open_replies, services
from apps.chat.models import Conversation, Message

pytestmark = pytest.mark.django_db


def test_a_retry_waits_while_another_answer_of_the_conversation_streams(user):
    conversation = Conversation.objects.create(owner=user)
    first = services.message_send(conversation=conversation, content="one").reply
    services.message_finish(message=first, status=Message.Status.FAILED, content="", error="x")
    second = services.message_send(conversation=conversation, content="two").reply

    with pytest.raises(services.ChatError, match="Wait for the current answer"):
        services.message_retry(message=first)

    first.refresh_from_db()
    assert first.status == Message.Status.FAILED  # untouched
    services.message_finish(message=second, status=Message.Status.COMPLETE, content="ok")
    assert services.message_retry(message=first).status == Message.Status.PENDING


def test_the_history_read_with_a_send_is_the_history_of_its_reply(user):
    from apps.chat.selectors import history_before

    conversation = Conversation.objects.create(owner=user)
    for number in range(7):
        reply = services.message_send(conversation=conversation, content=f"question {number}").reply
        # A failed answer and an empty stopped one are not history; a stopped one with text is.
        outcome = [
            (Message.Status.COMPLETE, f"answer {number}"),
            (Message.Status.FAILED, ""),
            (Message.Status.CANCELLED, ""),
            (Message.Status.CANCELLED, f"partial {number}"),
        ][number % 4]
        services.message_finish(message=reply, status=outcome[0], content=outcome[1])

    for window in (1, 2, 5, 50):
        sent = services.message_send(conversation=conversation, content="now", history=window)
        expected = history_before(message=sent.reply, limit=window)
        assert [(m.pk, m.role, m.content) for m in sent.history] == [
            (m.pk, m.role, m.content) for m in expected
        ]
        assert sent.history[-1].pk == sent.question.pk and len(sent.history) == min(window, 11)
        services.message_finish(message=sent.reply, status=Message.Status.FAILED, content="")
        Message.objects.filter(pk=sent.question.pk).delete()


def _until_another_session_waits_on_this_one(connection, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.02)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("in_a_transaction", [False, True], ids=["alone", "in a transaction"])
def test_two_sends_racing_in_one_conversation_save_one_turn(user, in_a_transaction):
    """The send statement is a transaction of its own; inside the caller's, the refusal leaves
    the caller's transaction usable (a savepoint)."""
    from contextlib import nullcontext

    from django.db import IntegrityError, connection, transaction

    conversation = Conversation.objects.create(owner=user)
    saved = threading.Event()

    def first_send():
        try:
            with transaction.atomic():
                services.message_send(conversation=conversation, content="one")
                saved.set()
                # Still uncommitted while the second send runs, until it waits on this turn's
                # row: its checks cannot see this turn.
                _until_another_session_waits_on_this_one(connection)
        finally:
            connection.close()

    racer = threading.Thread(target=first_send)
    racer.start()
    assert saved.wait(10)
    with transaction.atomic() if in_a_transaction else nullcontext():
        with pytest.raises(services.ChatError, match="Wait for the current answer") as caught:
            services.message_send(conversation=conversation, content="two")
        assert Conversation.objects.filter(pk=conversation.pk).exists()
    racer.join()
    assert isinstance(caught.value.__cause__, IntegrityError), "settled by the constraint"
    assert list(conversation.messages.values_list("role", "content")) == [
        ("user", "one"),
        ("assistant", ""),
    ]


def _orphan(conversation, *, age_seconds: int) -> Message:
    """An open reply as a web process that died mid-answer leaves it: no lease on it."""
    reply = services.message_send(conversation=conversation, content="are you there?").reply
    Message.objects.filter(pk=reply.pk).update(
        status=Message.Status.STREAMING, created_at=timezone.now() - timedelta(seconds=age_seconds)
    )
    cache.delete(open_replies._lease_key(reply.pk))
    return reply


def test_a_reply_left_behind_by_a_dead_process_does_not_block_its_conversation(user):
    conversation = Conversation.objects.create(owner=user)
    orphan = _orphan(conversation, age_seconds=60)

    sent = services.message_send(conversation=conversation, content="hello again", history=10)

    orphan.refresh_from_db()
    assert orphan.status == Message.Status.FAILED and orphan.error == open_replies.INTERRUPTED
    assert sent.reply.status == Message.Status.PENDING
    # The failed reply can be regenerated once the new one is done.
    services.message_finish(message=sent.reply, status=Message.Status.COMPLETE, content="hi")
    assert services.message_retry(message=orphan).status == Message.Status.PENDING


def test_a_reply_being_generated_is_never_taken_for_orphaned(user):
    conversation = Conversation.objects.create(owner=user)
    old = _orphan(conversation, age_seconds=600)
    open_replies.reply_lease_renew(reply_id=old.pk)  # its process is alive and renewing
    with pytest.raises(services.ChatError, match="Wait for the current answer"):
        services.message_send(conversation=conversation, content="two")

    other = Conversation.objects.create(owner=user)
    _orphan(other, age_seconds=2)  # no lease yet: just saved, its lease comes next
    with pytest.raises(services.ChatError, match="Wait for the current answer"):
        services.message_send(conversation=other, content="two")
    assert Message.objects.filter(status=Message.Status.FAILED).count() == 0


def test_the_page_of_a_conversation_with_an_orphaned_reply_offers_retry(client, user):
    client.force_login(user)
    conversation = Conversation.objects.create(owner=user)
    _orphan(conversation, age_seconds=60)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert open_replies.INTERRUPTED in page
    assert 'name="action" value="stop"' not in page and "Thalamus is answering" not in page


@pytest.mark.django_db(transaction=True)
async def test_an_answer_keeps_its_lease_while_it_streams(user, llm_stub, monkeypatch):
    from apps.cognition.pipeline import answer_saved_reply

    # Leases of one second, renewed every third of one.
    monkeypatch.setattr(open_replies, "REPLY_LEASE_SECONDS", 1)
    llm_stub.script({"content": "slow " * 30, "tps": 12})
    conversation = await Conversation.objects.acreate(owner=user)
    sent = await sync_to_async(services.message_send)(conversation=conversation, content="go")
    leased_late = None

    async def watch():
        nonlocal leased_late
        await asyncio.sleep(1.8)  # the lease taken at the save has expired by now
        leased_late = await cache.aget(open_replies._lease_key(sent.reply.pk))

    watcher = asyncio.ensure_future(watch())
    async for _ in answer_saved_reply(reply_id=sent.reply.pk):
        pass
    await watcher
    assert leased_late == 1


def _capped(conversation, text: str = "The first half of a long answer") -> Message:
    """An answer stopped at its token cap."""
    reply = services.message_send(conversation=conversation, content="tell me all").reply
    return services.message_finish(
        message=reply,
        status=Message.Status.COMPLETE,
        content=text,
        finish_reason=Message.FinishReason.LENGTH,
        completion_tokens=1024,
    )


def test_continue_reopens_an_answer_cut_short_and_keeps_its_text(user):
    conversation = Conversation.objects.create(owner=user)
    reply = _capped(conversation)

    continued = services.message_continue(message=reply)

    reply.refresh_from_db()
    assert reply.pk == continued.pk and reply.status == Message.Status.PENDING
    assert reply.content == "The first half of a long answer"
    assert (reply.finish_reason, reply.completion_tokens) == ("", 1024)
    assert Message.objects.filter(conversation=conversation).count() == 2


def test_only_an_answer_cut_short_can_be_continued(user):
    conversation = Conversation.objects.create(owner=user)
    sent = services.message_send(conversation=conversation, content="hi")
    whole = services.message_finish(
        message=sent.reply, status="complete", content="Hello!", finish_reason="stop"
    )
    broken = services.message_send(conversation=conversation, content="again").reply
    services.message_finish(message=broken, status="failed", content="", error="x")

    for message in (whole, sent.question, broken):
        with pytest.raises(services.ChatError, match="cut short"):
            services.message_continue(message=message)
        status = message.status
        message.refresh_from_db()
        assert message.status == status  # untouched

    # A continuation that broke off (failed or stopped) with text can be continued again.
    cut = services.message_send(conversation=conversation, content="more").reply
    services.message_finish(message=cut, status="failed", content="Half of it", error="x")
    assert services.message_continue(message=cut).content == "Half of it"


def test_a_continue_waits_while_another_answer_of_the_conversation_streams(user):
    conversation = Conversation.objects.create(owner=user)
    reply = _capped(conversation)
    services.message_send(conversation=conversation, content="next")

    with pytest.raises(services.ChatError, match="Wait for the current answer"):
        services.message_continue(message=reply)
    reply.refresh_from_db()
    assert (reply.status, reply.finish_reason) == ("complete", "length")


def test_a_trace_key_is_claimed_once_per_message(user):
    conversation = Conversation.objects.create(owner=user)
    reply = services.message_send(conversation=conversation, content="hello").reply

    first = services.message_trace_claim(message_id=reply.pk, key="work", value={"by": "one"})
    second = services.message_trace_claim(message_id=reply.pk, key="work", value={"by": "two"})

    assert (first, second) == (True, False)
    reply.refresh_from_db()
    assert reply.trace == {"work": {"by": "one"}}


def test_a_trace_put_sets_its_key_and_keeps_the_others(user):
    conversation = Conversation.objects.create(owner=user)
    reply = services.message_send(conversation=conversation, content="hello").reply
    services.message_start_streaming(message=reply, model="m", trace={"memory": {"used": 2}})
    services.message_trace_claim(message_id=reply.pk, key="work", value={"at": "noon"})

    services.message_trace_put(message_id=reply.pk, key="work", value={"done": True})

    reply.refresh_from_db()
    assert reply.trace == {"memory": {"used": 2}, "work": {"done": True}}
