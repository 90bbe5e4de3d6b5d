"""Imports end to end: an uploaded export becomes the user's conversations in a real worker,
once, a bounded batch at a time, resumed after a restart, learnt from, and only the owner's."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.imports import services, tasks
from apps.imports.formats import export_parse
from apps.imports.models import Import, PendingConversation
from apps.memory.models import MemoryNode
from tests.cognition.conftest import reflection, wait_for

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = pytest.mark.usefixtures("no_outbound_in_atomic")

FIXTURES = Path(__file__).parent / "fixtures"


def _upload(client, name: str, data: bytes | None = None):
    data = data if data is not None else (FIXTURES / name).read_bytes()
    return client.post(
        reverse("imports:upload"), {"file": SimpleUploadedFile(name, data)}, follow=True
    )


def _finished(user) -> Import:
    return wait_for(
        lambda: Import.objects.filter(owner=user, status=Import.Status.DONE).first(), timeout=30
    )


def _thread(conversation: Conversation) -> list[tuple[str, str, datetime]]:
    return [(m.role, m.content, m.created_at) for m in conversation.messages.all()]


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


@pytest.mark.parametrize(
    ("fixture", "title", "created", "first", "replies"),
    [
        (
            "chatgpt_conversations.json",
            "Sourdough starter help",
            "2024-03-01T10:00:00.123+00:00",
            ("user", "2024-03-01T10:00:10+00:00"),
            2,
        ),
        (
            "claude_conversations.json",
            "Rust lifetimes",
            "2024-05-02T09:15:00+00:00",
            ("user", "2024-05-02T09:15:10+00:00"),
            1,
        ),
        (
            "openwebui_export.json",
            "Marathon training",
            "2024-06-01T10:00:00+00:00",
            ("user", "2024-06-01T10:00:10+00:00"),
            1,
        ),
    ],
)
def test_each_export_becomes_the_users_conversations_with_their_messages_and_dates(
    celery_worker, client, user, config, fixture, title, created, first, replies
):
    config(reflection_enabled=False)
    client.force_login(user)

    response = _upload(client, fixture)

    assert "conversations. You can leave this page" in response.content.decode()
    done = _finished(user)
    assert done.replies_total == replies and done.error.startswith("Reflection is switched off")
    conversation = Conversation.objects.get(owner=user, title=title)
    assert conversation.created_at == _at(created)
    thread = _thread(conversation)
    assert (thread[0][0], thread[0][2]) == (first[0], _at(first[1]))
    assert conversation.updated_at == thread[-1][2]
    reply = conversation.messages.filter(role="assistant").first()
    assert reply.reply_to.role == "user" and reply.trace == {"imported": done.pk}
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert reply.content.split("'")[0] in page


def test_the_same_file_twice_is_one_import_and_adds_nothing(celery_worker, client, user, config):
    config(reflection_enabled=False)
    client.force_login(user)
    _upload(client, "claude_conversations.json")
    _finished(user)

    response = _upload(client, "claude_conversations.json")

    assert "This file was already imported on" in response.content.decode()
    assert Import.objects.filter(owner=user).count() == 1
    assert Message.objects.filter(conversation__owner=user).count() == 2


def test_a_later_export_of_the_same_account_adds_only_the_new_messages(
    celery_worker, client, user, config
):
    config(reflection_enabled=False)
    client.force_login(user)
    _upload(client, "claude_conversations.json")
    _finished(user)
    export = json.loads((FIXTURES / "claude_conversations.json").read_text())
    export[0]["chat_messages"].append(
        {"sender": "human", "text": "And what about 'static?", "created_at": "2024-05-03T08:00:00Z"}
    )

    _upload(client, "later.json", json.dumps(export).encode())

    wait_for(lambda: Import.objects.filter(owner=user, status="done").count() == 2, timeout=30)
    conversation = Conversation.objects.get(owner=user)
    assert [m.content for m in conversation.messages.all()][-1] == "And what about 'static?"
    assert conversation.messages.count() == 3
    assert Import.objects.filter(owner=user).first().conversations_added == 0


def test_a_file_that_is_not_an_export_is_refused_with_the_problem_named(client, user):
    client.force_login(user)

    response = _upload(client, "notes.json", b'{"model": "gpt-4o", "messages": []}')

    page = response.content.decode()
    assert "Nothing was imported: This JSON is an object with messages, model" in page
    assert not Import.objects.exists()


def _many(count: int) -> bytes:
    return json.dumps(
        [
            {
                "uuid": f"c-{n}",
                "name": f"Chat {n}",
                "created_at": "2024-01-01T00:00:00Z",
                "chat_messages": [
                    {"sender": "human", "text": f"question {n}", "created_at": None},
                    {"sender": "assistant", "text": f"answer {n}", "created_at": None},
                ],
            }
            for n in range(count)
        ]
    ).encode()


def test_an_untitled_conversation_is_named_by_its_opening_words(user):
    export = [
        {
            "uuid": "untitled",
            "name": "",
            "created_at": "2024-01-01T00:00:00Z",
            "chat_messages": [{"sender": "human", "text": "Which tent for the Dolomites?\nThanks"}],
        }
    ]
    started, _ = services.import_start(
        user=user, data=json.dumps(export).encode(), filename="one.json"
    )

    services.import_read_batch(import_id=started.pk)

    assert Conversation.objects.get(owner=user).title == "Which tent for the Dolomites?"


def test_imported_messages_and_titles_are_stored_without_invisible_characters(user):
    hidden = "\u200b\u202e\U000e0041"
    export = [
        {
            "uuid": "hidden",
            "name": f"Ten{hidden}ts",
            "created_at": "2024-01-01T00:00:00Z",
            "chat_messages": [
                {"sender": "human", "text": f"Which te{hidden}nt for the Dolomites?"},
                {"sender": "assistant", "text": f"A light{hidden} one.\r\nGood trip."},
            ],
        }
    ]
    started, _ = services.import_start(
        user=user, data=json.dumps(export).encode(), filename="hidden.json"
    )

    services.import_read_batch(import_id=started.pk)

    conversation = Conversation.objects.get(owner=user)
    assert conversation.title == "Tents"
    assert [m.content for m in conversation.messages.order_by("pk")] == [
        "Which tent for the Dolomites?",
        "A light one.\nGood trip.",
    ]


def test_conversations_are_read_a_bounded_batch_per_task(user):
    started, _ = services.import_start(user=user, data=_many(45), filename="many.json")

    services.import_read_batch(import_id=started.pk)

    started.refresh_from_db()
    assert (started.conversations_done, started.status) == (services.READ_BATCH, "running")
    assert Conversation.objects.filter(owner=user).count() == services.READ_BATCH
    services.import_read_batch(import_id=started.pk)
    services.import_read_batch(import_id=started.pk)
    started.refresh_from_db()
    assert (started.conversations_done, started.status) == (45, "learning")
    assert not started.pending.exists()
    assert Message.objects.filter(conversation__owner=user).count() == 90


def test_an_import_left_running_by_a_restart_is_picked_up_when_its_page_is_visited(
    celery_worker, client, user, config
):
    config(reflection_enabled=False)
    # As a worker killed mid-way leaves it: 10 conversations read, 20 pending, no task queued.
    stalled = Import.objects.create(
        owner=user,
        sha256="0" * 64,
        source="claude",
        conversations_total=30,
        conversations_done=10,
        heartbeat_at=timezone.now() - services.STALLED_AFTER - timedelta(minutes=1),
    )
    PendingConversation.objects.bulk_create(
        PendingConversation(upload=stalled, position=n, data=parsed.as_dict())
        for n, parsed in enumerate(export_parse(data=_many(30)).conversations)
        if n >= 10
    )
    client.force_login(user)

    client.get(reverse("imports:page"))

    done = _finished(user)
    assert (done.conversations_done, done.conversations_added) == (30, 20)
    assert Conversation.objects.filter(owner=user).count() == 20


def test_imported_replies_are_learnt_from_in_batches_and_their_memories_marked_imported(
    celery_worker, client, user, llm_stub, config
):
    config(critic_enabled=False)
    llm_stub.script(
        reflection("I live in Lisbon"),
        reflection("I'm vegetarian"),
    )
    client.force_login(user)

    _upload(client, "chatgpt_conversations.json")

    done = _finished(user)
    assert (done.replies_total, done.replies_learnt, done.error) == (2, 2, "")
    nodes = MemoryNode.objects.filter(owner=user).order_by("pk")
    assert [(n.description, n.source) for n in nodes] == [
        ("The user's sourdough starter smells like acetone", "imported"),
        ("The user lives in Lisbon and it's hot", "imported"),
        ("The user is vegetarian", "imported"),
    ]
    assert {n.source_message.trace["imported"] for n in nodes} == {done.pk}


def test_replies_are_learnt_from_a_bounded_batch_per_task(user, llm_stub):
    started, _ = services.import_start(user=user, data=_many(7), filename="many.json")
    services.import_read_batch(import_id=started.pk)

    services.import_learn_batch(import_id=started.pk)

    started.refresh_from_db()
    assert (started.replies_total, started.replies_learnt) == (7, services.LEARN_BATCH)
    assert started.status == "learning"
    asked = [r for r in llm_stub.requests if "word for word" in str(r["body"])]
    assert len(asked) == services.LEARN_BATCH
    services.import_learn_batch(import_id=started.pk)
    started.refresh_from_db()
    assert (started.replies_learnt, started.status) == (7, "done")


def test_another_user_never_sees_an_import_or_its_conversations(
    celery_worker, client, user, other_user, config
):
    config(reflection_enabled=False)
    client.force_login(user)
    _upload(client, "openwebui_export.json")
    _finished(user)

    client.force_login(other_user)
    page = client.get(reverse("imports:page")).content.decode()
    assert "Nothing imported yet." in page and "openwebui_export.json" not in page
    assert not Conversation.objects.filter(owner=other_user).exists()
    # The same file is the other user's own, new import.
    assert "You can leave this page" in _upload(client, "openwebui_export.json").content.decode()
    assert Import.objects.filter(owner=other_user).count() == 1


def test_the_beat_sweep_queues_only_imports_whose_heartbeat_stopped(user):
    stalled, _ = services.import_start(user=user, data=_many(2), filename="a.json")
    fresh, _ = services.import_start(user=user, data=_many(3), filename="b.json")
    Import.objects.filter(pk=stalled.pk).update(
        heartbeat_at=timezone.now() - services.STALLED_AFTER - timedelta(minutes=1)
    )

    assert tasks.resume_stalled() == 1

    stalled.refresh_from_db()
    assert stalled.heartbeat_at > timezone.now() - timedelta(minutes=1)
    assert services.imports_resume_stalled() == []
