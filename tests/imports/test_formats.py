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
        (b'"hello"', "This JSON is a string, not a ChatGPT or Claude conversations.json"),
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
