"""Reading exports: each format's visible thread with its dates, and a named error otherwise."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from apps.imports import formats
from apps.imports.formats import ImportFileError, export_parse

FIXTURES = Path(__file__).parent / "fixtures"


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_a_chatgpt_export_keeps_the_thread_shown_last_and_drops_hidden_and_regenerated_turns():
    export = export_parse(data=(FIXTURES / "chatgpt_conversations.json").read_bytes())
    assert export.source == "chatgpt"
    sourdough = export.conversations[0]
    assert sourdough.external_id == "6f1c2a90-0001-4b5e-9c7d-aaaaaaaaaaaa"
    assert sourdough.created_at == "2024-03-01T10:00:00.123000+00:00"
    assert [(m.role, m.content[:13]) for m in sourdough.messages] == [
        ("user", "My sourdough "),
        ("assistant", "An acetone sm"),
        ("user", "Thanks, here'"),
    ]
    assert sourdough.messages[1].created_at == "2024-03-01T10:00:30+00:00"


def test_a_claude_export_reads_text_from_content_blocks_and_skips_empty_conversations():
    export = export_parse(data=(FIXTURES / "claude_conversations.json").read_bytes())
    assert export.source == "claude"
    [rust] = export.conversations
    assert rust.title == "Rust lifetimes"
    assert [m.role for m in rust.messages] == ["user", "assistant"]
    assert rust.messages[1].content == "A lifetime names how long a borrow is valid."
    assert rust.messages[0].created_at == "2024-05-02T09:15:10+00:00"


def test_an_open_webui_export_follows_the_current_branch_of_its_history():
    export = export_parse(data=(FIXTURES / "openwebui_export.json").read_bytes())
    assert export.source == "openwebui"
    [marathon] = export.conversations
    assert marathon.created_at == "2024-06-01T10:00:00+00:00"
    assert [m.content for m in marathon.messages] == [
        "I'm running the Berlin marathon in September.",
        "Build up to 60 km a week by July.",
    ]


def test_the_conversations_json_inside_an_export_zip_is_found():
    data = _zip(
        {
            "user.json": b"{}",
            "export/conversations.json": (FIXTURES / "claude_conversations.json").read_bytes(),
        }
    )
    assert export_parse(data=data, filename="data.zip").source == "claude"


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b"", "The file is empty."),
        (b"<html>not json</html>", "is not valid JSON"),
        (b"\xff\xfe\x00garbage", "is not a text file"),
        (b"[]", "empty list: it holds no conversations"),
        (b'"hello"', "This JSON is a text, not a ChatGPT or Claude conversations.json"),
        (
            json.dumps([{"uuid": "u", "full_name": "Ada", "email_address": "a@b.c"}]).encode(),
            "This looks like Claude's users.json, not a ChatGPT or Claude conversations.json",
        ),
        (
            json.dumps({"model": "gpt-4", "messages": []}).encode(),
            "This JSON is an object with messages, model, not a ChatGPT",
        ),
        (_zip({"photo.png": b"\x89PNG"}), "This zip holds no conversations.json"),
        (json.dumps([{"uuid": "u", "chat_messages": []}]).encode(), "holds no conversations"),
    ],
)
def test_a_file_that_is_not_an_export_gets_an_error_naming_the_problem(data, named):
    with pytest.raises(ImportFileError, match=None) as caught:
        export_parse(data=data, filename="upload.json")
    assert named in str(caught.value)


def test_a_file_over_the_size_limit_is_refused_even_inside_a_small_zip(monkeypatch):
    monkeypatch.setattr(formats, "MAX_IMPORT_BYTES", 10_000)
    big = json.dumps([{"uuid": "u", "chat_messages": [{"text": "x" * 20_000}]}]).encode()
    with pytest.raises(ImportFileError, match="the limit is"):
        export_parse(data=big)
    with pytest.raises(ImportFileError, match="the limit is"):
        export_parse(data=_zip({"conversations.json": big}))


def test_a_conversation_of_the_wrong_shape_is_left_out_and_counted_and_the_rest_is_read():
    conversations = json.loads((FIXTURES / "chatgpt_conversations.json").read_bytes())
    conversations.insert(0, {"mapping": ["not", "an", "object"], "title": "Broken"})
    conversations.append(None)

    export = export_parse(data=json.dumps(conversations).encode())

    assert [c.title for c in export.conversations] == ["Sourdough starter help", "Trip to Porto"]
    assert export.skipped == 2
    assert export.first_problem == "in conversation 1, “mapping” should be an object"


def test_an_export_none_of_whose_conversations_can_be_read_is_refused_naming_the_first_problem():
    data = json.dumps([{"chat_messages": "hello"}, {"chat_messages": {"a": 1}}]).encode()

    with pytest.raises(ImportFileError) as caught:
        export_parse(data=data)

    assert str(caught.value) == (
        "None of the 2 conversations of this Claude export could be read: in conversation 1, "
        "“chat_messages” should be a list."
    )


def test_text_postgresql_cannot_keep_is_dropped_and_a_wrong_detail_left_empty():
    conversation = {
        "uuid": None,
        "name": ["not", "a", "title"],
        "created_at": float("inf"),
        "chat_messages": [
            {"sender": "human", "text": "Bees\u0000 in \ud800Lyon", "created_at": "yesterday"},
            {"sender": {"role": "assistant"}, "text": "dropped: no role"},
            "not a message",
            {"sender": "assistant", "text": "Lovely."},
        ],
    }
    data = json.dumps([conversation]).replace("Infinity", "1e999").encode()

    [parsed] = export_parse(data=data).conversations

    assert [(m.role, m.content, m.created_at) for m in parsed.messages] == [
        ("user", "Bees in Lyon", None),
        ("assistant", "Lovely.", None),
    ]
    assert (parsed.title, parsed.created_at) == ("", None)
    # Without an id, the conversation is known by how it began, in this export and the next.
    assert parsed.external_id.startswith("sha1:")
    assert export_parse(data=data).conversations[0].external_id == parsed.external_id


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b"[" * 5000, "nests lists or objects too deeply"),
        (b'[{"mapping": {}, "create_time": NaN}]', "holds a number that is not one JSON can have"),
        (b"[" + b"9" * 5000 + b"]", "holds a number that is not one JSON can have"),
        (b'[{"a": 1,}]', "is not valid JSON (it goes wrong at line 1, column 10)"),
    ],
)
def test_json_that_python_cannot_or_should_not_read_is_refused_in_our_words(data, named):
    with pytest.raises(ImportFileError) as caught:
        export_parse(data=data, filename="upload.json")
    assert named in str(caught.value)
