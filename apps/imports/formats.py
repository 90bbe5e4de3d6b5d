"""Reading another assistant's export: ChatGPT's and Claude's conversations.json and Open WebUI's
chat export, as a .json or inside the export's .zip.

Every format becomes the same plain list of conversations, or an ImportFileError whose message
names what is wrong with the file, for the person who chose it.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

# The largest file (or file inside a zip) read: ChatGPT exports of years of use stay well below.
MAX_IMPORT_BYTES = 64 * 1024 * 1024

CHATGPT = "chatgpt"
CLAUDE = "claude"
OPENWEBUI = "openwebui"
SOURCE_NAMES = {CHATGPT: "ChatGPT", CLAUDE: "Claude", OPENWEBUI: "Open WebUI"}
EXPECTED = "a ChatGPT or Claude conversations.json, or an Open WebUI chat export"


class ImportFileError(ValueError):
    """A file that is not an export we can read, with a sentence saying why."""


@dataclass
class ParsedMessage:
    role: str  # "user" or "assistant"
    content: str
    created_at: str | None  # ISO 8601, UTC


@dataclass
class ParsedConversation:
    external_id: str
    title: str
    created_at: str | None
    messages: list[ParsedMessage] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ParsedExport:
    source: str
    conversations: list[ParsedConversation]


def export_parse(*, data: bytes, filename: str = "") -> ParsedExport:
    """The conversations of an uploaded export, or ImportFileError naming the problem."""
    if not data:
        raise ImportFileError("The file is empty.")
    if len(data) > MAX_IMPORT_BYTES:
        raise ImportFileError(_too_big(len(data)))
    if zipfile.is_zipfile(io.BytesIO(data)):
        data = _json_from_zip(data)
    try:
        payload = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ImportFileError(
            f"“{filename or 'This file'}” is not a text file: expected {EXPECTED}."
        ) from None
    except ValueError as exc:
        raise ImportFileError(
            f"“{filename or 'This file'}” is not valid JSON ({exc.msg} at line {exc.lineno}): "
            f"expected {EXPECTED}."
        ) from None
    source = _recognise(payload)
    items = [payload] if isinstance(payload, dict) else payload
    parse = {CHATGPT: _chatgpt, CLAUDE: _claude, OPENWEBUI: _openwebui}[source]
    conversations = [c for c in (parse(item) for item in items) if c.messages]
    if not conversations:
        raise ImportFileError(
            f"This {SOURCE_NAMES[source]} export holds no conversations with messages."
        )
    return ParsedExport(source=source, conversations=conversations)


def _too_big(size: int) -> str:
    return (
        f"The file is {size / 1024 / 1024:,.0f} MB; the limit is "
        f"{MAX_IMPORT_BYTES // 1024 // 1024} MB."
    )


def _json_from_zip(data: bytes) -> bytes:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = [n for n in archive.namelist() if not n.endswith("/")]
        wanted = [n for n in names if n.rsplit("/", 1)[-1] == "conversations.json"]
        if not wanted:
            wanted = [n for n in names if n.lower().endswith(".json")]
            if len(wanted) != 1:
                raise ImportFileError(
                    "This zip holds no conversations.json: choose the zip of a ChatGPT or "
                    "Claude data export, or the conversations.json inside it."
                )
        info = archive.getinfo(wanted[0])
        # A zip's declared size is checked before reading, so a tiny zip of a huge file is not
        # inflated into memory.
        if info.file_size > MAX_IMPORT_BYTES:
            raise ImportFileError(_too_big(info.file_size))
        return archive.read(info)
    except (zipfile.BadZipFile, OSError, RuntimeError) as exc:
        raise ImportFileError(f"The zip file cannot be read: {exc}.") from None


# Other files of the same exports, named so a person who picked the wrong one knows which.
_LOOKALIKES = [
    ({"full_name", "email_address"}, "Claude's users.json"),
    ({"prompt_template"}, "Claude's projects.json"),
    ({"docs", "is_private"}, "Claude's projects.json"),
    ({"email", "chatgpt_plus_user"}, "ChatGPT's user.json"),
    ({"conversation_id", "rating"}, "ChatGPT's message_feedback.json"),
    ({"share_id"}, "ChatGPT's shared_conversations.json"),
    ({"description", "kind", "source"}, "a list of memories"),
]


def _recognise(payload) -> str:
    if isinstance(payload, list) and not payload:
        raise ImportFileError("The export is an empty list: it holds no conversations.")
    items = [payload] if isinstance(payload, dict) else payload
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ImportFileError(f"This JSON is {_shape(payload)}, not {EXPECTED}.")
    first = items[0]
    if "mapping" in first:
        return CHATGPT
    if "chat_messages" in first:
        return CLAUDE
    if isinstance(first.get("chat"), dict):
        return OPENWEBUI
    for keys, name in _LOOKALIKES:
        if keys <= first.keys():
            raise ImportFileError(f"This looks like {name}, not {EXPECTED}.")
    if isinstance(payload, dict):
        keys = ", ".join(sorted(payload)[:5])
        raise ImportFileError(f"This JSON is an object with {keys or 'no keys'}, not {EXPECTED}.")
    keys = ", ".join(sorted(first)[:5])
    raise ImportFileError(f"This JSON is a list of objects with {keys}, not {EXPECTED}.")


def _shape(payload) -> str:
    if isinstance(payload, list):
        return "a list of " + type(next(x for x in payload if not isinstance(x, dict))).__name__
    return {str: "a string", int: "a number", float: "a number", bool: "true or false"}.get(
        type(payload), "empty (null)"
    )


def _when(value) -> str | None:
    """An export's time (epoch seconds, or ISO 8601) as ISO 8601 UTC."""
    if value in (None, ""):
        return None
    try:
        if isinstance(value, int | float):
            # Open WebUI has written milliseconds and nanoseconds in some versions.
            while value > 1e11:
                value /= 1000
            moment = datetime.fromtimestamp(value, tz=UTC)
        else:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return moment.astimezone(UTC).isoformat()


def _text(value) -> str:
    return value.strip() if isinstance(value, str) else ""


def _role(value) -> str | None:
    return {"user": "user", "human": "user", "assistant": "assistant"}.get(value)


def _chatgpt(item: dict) -> ParsedConversation:
    mapping = item.get("mapping") or {}
    # The visible thread: from the node last shown back to the root (edits and regenerated
    # answers are side branches).
    node_id = item.get("current_node")
    if node_id not in mapping:
        leaves = [key for key, node in mapping.items() if not (node or {}).get("children")]
        node_id = leaves[-1] if leaves else None
    thread, seen = [], set()
    while node_id in mapping and node_id not in seen:
        seen.add(node_id)
        thread.append(mapping[node_id] or {})
        node_id = (mapping[node_id] or {}).get("parent")
    messages = []
    for node in reversed(thread):
        message = node.get("message") or {}
        role = _role((message.get("author") or {}).get("role"))
        if role is None or (message.get("metadata") or {}).get(
            "is_visually_hidden_from_conversation"
        ):
            continue
        content = message.get("content") or {}
        parts = content.get("parts") or []
        text = "\n".join(part for part in parts if isinstance(part, str)).strip()
        text = text or _text(content.get("text"))
        if text:
            messages.append(ParsedMessage(role, text, _when(message.get("create_time"))))
    return ParsedConversation(
        external_id=str(item.get("conversation_id") or item.get("id") or item.get("create_time")),
        title=_text(item.get("title")),
        created_at=_when(item.get("create_time")),
        messages=messages,
    )


def _claude(item: dict) -> ParsedConversation:
    messages = []
    for message in item.get("chat_messages") or []:
        role = _role(message.get("sender"))
        text = (
            _text(message.get("text"))
            or "\n".join(
                _text(part.get("text"))
                for part in message.get("content") or []
                if isinstance(part, dict) and part.get("type") == "text"
            ).strip()
        )
        if role and text:
            messages.append(ParsedMessage(role, text, _when(message.get("created_at"))))
    return ParsedConversation(
        external_id=str(item.get("uuid") or item.get("created_at")),
        title=_text(item.get("name")),
        created_at=_when(item.get("created_at")),
        messages=messages,
    )


def _openwebui(item: dict) -> ParsedConversation:
    chat = item.get("chat") or {}
    history = chat.get("history") or {}
    nodes = history.get("messages") or {}
    if isinstance(nodes, dict) and history.get("currentId") in nodes:
        # The branch shown last, as Open WebUI keeps regenerated answers as siblings.
        thread, node_id = [], history["currentId"]
        while node_id in nodes and len(thread) <= len(nodes):
            thread.append(nodes[node_id])
            node_id = nodes[node_id].get("parentId")
        raw = list(reversed(thread))
    else:
        raw = chat.get("messages") or []
    messages = []
    for message in raw:
        role = _role(message.get("role"))
        text = _text(message.get("content"))
        if role and text:
            messages.append(ParsedMessage(role, text, _when(message.get("timestamp"))))
    return ParsedConversation(
        external_id=str(item.get("id") or chat.get("id") or item.get("created_at")),
        title=_text(item.get("title") or chat.get("title")),
        created_at=_when(item.get("created_at") or chat.get("timestamp")),
        messages=messages,
    )
