"""Mutated exports through the real upload view: no file makes a 500, a refused file gets one
sentence of ours naming the problem, and an accepted file imports every conversation the
mutations left alone."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.chat.models import Conversation
from apps.imports import services
from apps.imports.formats import ImportFileError, export_parse
from apps.imports.models import Import
from tests.fuzz import mutants

FIXTURES = Path(__file__).parent / "fixtures"
FILES_PER_FORMAT = 100
# What a refusal must never show: the parser's or the validator's own words, or a traceback.
RAW = re.compile(
    r"Traceback|Error|Expecting|Unterminated|Input should|validation error|pydantic|codec|"
    r"decode|line \d+ column|\(char \d+\)|\\u|\\x"
)


def _sample(fixture: str) -> list[dict]:
    """The fixture's conversations twice over, each copy with ids of its own."""
    conversations = json.loads((FIXTURES / fixture).read_bytes())
    sample = []
    for copy_number in range(2):
        for conversation in copy.deepcopy(conversations):
            for key in ("id", "conversation_id", "uuid"):
                if conversation.get(key):
                    conversation[key] = f"{conversation[key]}-{copy_number}"
            sample.append(conversation)
    return sample


def _thread(parsed) -> tuple:
    return tuple((message.role, message.content) for message in parsed.messages)


def _expected_thread(conversation: dict) -> tuple:
    """The messages of one conversation of the sample; () for one with none."""
    try:
        [parsed] = export_parse(data=json.dumps([conversation]).encode()).conversations
    except ImportFileError:
        return ()
    return _thread(parsed)


def _saved_thread(conversation: Conversation) -> tuple:
    return tuple(conversation.messages.order_by("created_at", "id").values_list("role", "content"))


def assert_one_sentence_of_ours(text: str) -> None:
    assert "\n" not in text and len(text) < 400, text
    assert text.endswith("."), text
    # One sentence: no full stop followed by a new sentence (file names aside).
    assert not re.search(r"[.!?] [A-Z]", text.replace("“", "").replace("”", "")), text
    assert not RAW.search(text), text


@pytest.mark.parametrize(
    "fixture",
    ["chatgpt_conversations.json", "claude_conversations.json", "openwebui_export.json"],
)
def test_mutated_exports_are_refused_in_one_sentence_or_import_what_is_valid(
    client, django_user_model, fixture
):
    sample = _sample(fixture)
    expected = {n: _expected_thread(conversation) for n, conversation in enumerate(sample)}
    client.raise_request_exception = False
    statuses, outcomes = Counter(), Counter()

    for number, mutant in enumerate(mutants(sample, count=FILES_PER_FORMAT, seed=27)):
        user = django_user_model.objects.create(username=f"fuzz{number}")
        client.force_login(user)
        client.cookies.pop("messages", None)  # the last file's, never read
        upload = SimpleUploadedFile(f"export{number}.json", mutant.data)
        response = client.post(reverse("imports:upload"), {"file": upload})
        statuses[response.status_code] += 1
        if response.status_code != 302:
            continue
        [message] = [str(m) for m in get_messages(response.wsgi_request)]
        started = Import.objects.filter(owner=user).first()
        if started is None:
            outcomes["refused"] += 1
            assert message.startswith("Nothing was imported: "), (mutant.mutations, message)
            assert_one_sentence_of_ours(message.removeprefix("Nothing was imported: "))
            continue
        outcomes["accepted"] += 1
        assert message.startswith(f"Importing {started.conversations_total} "), message
        while started.status == Import.Status.RUNNING:
            started = services.import_read_batch(import_id=started.pk)
        imported = Counter(_saved_thread(c) for c in Conversation.objects.filter(owner=user))
        assert imported.total() == started.conversations_added == started.conversations_total
        if mutant.touched is not None:
            # Conversations the mutations did not reach are imported whole.
            untouched = [t for n, t in expected.items() if t and n not in mutant.touched]
            assert not Counter(untouched) - imported, mutant.mutations

    print(f"\n{fixture}: {dict(statuses)} {dict(outcomes)}")
    assert statuses == {302: FILES_PER_FORMAT}


def test_an_export_with_an_unreadable_conversation_says_what_was_left_out(client, user):
    conversations = json.loads((FIXTURES / "chatgpt_conversations.json").read_bytes())
    conversations.insert(0, {"mapping": "broken", "title": "Broken"})
    client.force_login(user)

    upload = SimpleUploadedFile("conversations.json", json.dumps(conversations).encode())
    response = client.post(reverse("imports:upload"), {"file": upload}, follow=True)

    assert [str(m) for m in response.context["messages"]] == [
        "Importing 2 ChatGPT conversations (1 could not be read and is left out: in "
        "conversation 1, “mapping” should be an object). You can leave this page: the import "
        "goes on in the background."
    ]
