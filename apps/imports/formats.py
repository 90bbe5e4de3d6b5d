"""Reading another assistant's export: ChatGPT's and Claude's conversations.json and Open WebUI's
chat export, as a .json or inside the export's .zip.

Every format becomes the same plain list of conversations, or an ImportFileError whose message
names what is wrong with the file, for the person who chose it.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Annotated, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    OnErrorOmit,
    ValidationError,
    WrapValidator,
)

from apps.core.validation import (
    StorableText,
    UnreadableJSON,
    json_load,
    storable_text,
    validation_problem,
)

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
    # Conversations left out because their shape is wrong, and the first one's problem.
    skipped: int = 0
    first_problem: str = ""


def export_parse(*, data: bytes, filename: str = "") -> ParsedExport:
    """The conversations of an uploaded export, or ImportFileError naming the problem.

    Each conversation is validated on its own: one whose shape is wrong (its messages not a
    list, say) is left out and counted, a detail that is wrong (a date that is not one) is left
    empty. A file none of whose conversations can be read is refused, naming the first problem.
    """
    if not data:
        raise ImportFileError("The file is empty.")
    if len(data) > MAX_IMPORT_BYTES:
        raise ImportFileError(_too_big(len(data)))
    if zipfile.is_zipfile(io.BytesIO(data)):
        data = _json_from_zip(data)
    name = f"“{storable_text(filename)[:80]}”" if filename else "This file"
    try:
        payload = json_load(data, name=name)
    except UnreadableJSON as exc:
        raise ImportFileError(f"{exc}: expected {EXPECTED}.") from None
    source = _recognise(payload)
    model = _MODELS[source]
    items = [payload] if isinstance(payload, dict) else payload
    conversations, skipped, first_problem = [], 0, None
    for position, item in enumerate(items, start=1):
        try:
            conversation = model.model_validate(item).parsed()
        except ValidationError as exc:
            skipped += 1
            first_problem = first_problem or (position, validation_problem(exc, whole="it"))
            continue
        if conversation.messages:
            conversations.append(conversation)
    where = f"in conversation {first_problem[0]}, {first_problem[1]}" if first_problem else ""
    if not conversations and skipped and len(items) == 1:
        raise ImportFileError(
            f"This {SOURCE_NAMES[source]} export's conversation could not be read: "
            f"{first_problem[1]}."
        )
    if not conversations and skipped:
        raise ImportFileError(
            f"None of the {len(items)} conversations of this {SOURCE_NAMES[source]} export "
            f"could be read: {where}."
        )
    if not conversations:
        raise ImportFileError(
            f"This {SOURCE_NAMES[source]} export holds no conversations with messages."
        )
    return ParsedExport(
        source=source, conversations=conversations, skipped=skipped, first_problem=where
    )


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
    except (zipfile.BadZipFile, OSError, RuntimeError, EOFError, NotImplementedError, zlib.error):
        raise ImportFileError("The zip file cannot be read: it is damaged or encrypted.") from None


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
    objects = [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
    if not objects:
        raise ImportFileError(f"This JSON is {_shape(payload)}, not {EXPECTED}.")
    # Recognised by its first conversation that has its format's key; a conversation that
    # lacks it, or an item that is not an object, is left out as unreadable.
    for item in objects:
        if "mapping" in item:
            return CHATGPT
        if "chat_messages" in item:
            return CLAUDE
        if isinstance(item.get("chat"), dict):
            return OPENWEBUI
    first = objects[0]
    for keys, name in _LOOKALIKES:
        if keys <= first.keys():
            raise ImportFileError(f"This looks like {name}, not {EXPECTED}.")
    keys = ", ".join(storable_text(key)[:40] for key in sorted(first)[:5]) or "no keys"
    if isinstance(payload, dict):
        raise ImportFileError(f"This JSON is an object with {keys}, not {EXPECTED}.")
    raise ImportFileError(f"This JSON is a list of objects with {keys}, not {EXPECTED}.")


def _shape(payload) -> str:
    if isinstance(payload, list):
        return "a list of " + _KINDS[type(next(x for x in payload if not isinstance(x, dict)))][1]
    return _KINDS[type(payload)][0]


# What a JSON value that is not an object is called, alone and in a list.
_KINDS = {
    str: ("a text", "texts"),
    int: ("a number", "numbers"),
    float: ("a number", "numbers"),
    bool: ("true or false", "trues and falses"),
    list: ("a list", "lists"),
    type(None): ("null", "nulls"),
}


def _when(value) -> str | None:
    """An export's time (epoch seconds, or ISO 8601) as ISO 8601 UTC; None if it is not one."""
    if value in (None, "") or isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            if not math.isfinite(value):
                return None
            # Open WebUI has written milliseconds and nanoseconds in some versions.
            while value > 1e11:
                value /= 1000
            moment = datetime.fromtimestamp(value, tz=UTC)
        elif isinstance(value, str):
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
        else:
            return None
        return moment.astimezone(UTC).isoformat()
    except (ValueError, OverflowError, OSError):
        return None


def _or_none(value, handler):
    try:
        return handler(value)
    except ValidationError:
        return None


def _text(value) -> str:
    return storable_text(value).strip() if isinstance(value, str) else ""


def _role(value) -> str | None:
    if not isinstance(value, str):
        return None
    return {"user": "user", "human": "user", "assistant": "assistant"}.get(value)


def _external_id(*candidates, conversation: ParsedConversation) -> str:
    """The export's id of a conversation; for one without, a digest of how it began, so the
    same conversation in a later export is still recognised."""
    for candidate in candidates:
        if candidate not in (None, ""):
            return storable_text(str(candidate))
    first = conversation.messages[0].content if conversation.messages else ""
    opening = json.dumps([conversation.created_at, conversation.title, first])
    return "sha1:" + hashlib.sha1(opening.encode()).hexdigest()


# What the export holds, validated. Its shape (a conversation's messages or mapping) must be
# right or the conversation is left out; a detail that is wrong becomes empty (`Detail`, `Text`,
# `Moment`, `Role`), and a message that is not one is dropped (`OnErrorOmit`).
T = TypeVar("T")
Detail = Annotated[T | None, WrapValidator(_or_none)]
Text = Annotated[str, BeforeValidator(_text)]
Moment = Annotated[str | None, BeforeValidator(_when)]
Role = Annotated[str | None, BeforeValidator(_role)]
Id = Annotated[str | int | None, WrapValidator(_or_none)]


class _Export(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _ChatGPTContent(_Export):
    parts: Detail[list[OnErrorOmit[StorableText]]] = None
    text: Text = ""


class _ChatGPTMessage(_Export):
    author: Detail[dict] = None
    content: Detail[_ChatGPTContent] = None
    create_time: Moment = None
    metadata: Detail[dict] = None

    def parsed(self) -> ParsedMessage | None:
        role = _role((self.author or {}).get("role"))
        if role is None or (self.metadata or {}).get("is_visually_hidden_from_conversation"):
            return None
        content = self.content or _ChatGPTContent()
        text = "\n".join(content.parts or []).strip() or content.text
        return ParsedMessage(role, text, self.create_time) if text else None


class _ChatGPTNode(_Export):
    message: Detail[_ChatGPTMessage] = None
    parent: Detail[str] = None
    children: Detail[list] = None


class ChatGPTConversation(_Export):
    mapping: dict[str, Detail[_ChatGPTNode]]
    current_node: Detail[str] = None
    title: Text = ""
    create_time: Moment = None
    conversation_id: Id = None
    id: Id = None

    def parsed(self) -> ParsedConversation:
        mapping = {key: node or _ChatGPTNode() for key, node in self.mapping.items()}
        # The visible thread: from the node last shown back to the root (edits and regenerated
        # answers are side branches).
        node_id = self.current_node
        if node_id not in mapping:
            leaves = [key for key, node in mapping.items() if not node.children]
            node_id = leaves[-1] if leaves else None
        thread, seen = [], set()
        while node_id in mapping and node_id not in seen:
            seen.add(node_id)
            thread.append(mapping[node_id])
            node_id = mapping[node_id].parent
        messages = [node.message.parsed() for node in reversed(thread) if node.message]
        conversation = ParsedConversation(
            external_id="",
            title=self.title,
            created_at=self.create_time,
            messages=[message for message in messages if message],
        )
        conversation.external_id = _external_id(
            self.conversation_id, self.id, conversation=conversation
        )
        return conversation


class _ClaudePart(_Export):
    type: Detail[str] = None
    text: Text = ""


class _ClaudeMessage(_Export):
    sender: Role = None
    text: Text = ""
    content: Detail[list[OnErrorOmit[_ClaudePart]]] = None
    created_at: Moment = None

    def parsed(self) -> ParsedMessage | None:
        blocks = [part.text for part in self.content or [] if part.type == "text"]
        text = self.text or "\n".join(blocks).strip()
        return ParsedMessage(self.sender, text, self.created_at) if self.sender and text else None


class ClaudeConversation(_Export):
    chat_messages: list[OnErrorOmit[_ClaudeMessage]]
    uuid: Id = None
    name: Text = ""
    created_at: Moment = None

    def parsed(self) -> ParsedConversation:
        messages = [message.parsed() for message in self.chat_messages]
        conversation = ParsedConversation(
            external_id="",
            title=self.name,
            created_at=self.created_at,
            messages=[message for message in messages if message],
        )
        conversation.external_id = _external_id(self.uuid, conversation=conversation)
        return conversation


class _OpenWebUIMessage(_Export):
    role: Role = None
    content: Text = ""
    timestamp: Moment = None
    parentId: Detail[str] = None  # noqa: N815 (Open WebUI's name)

    def parsed(self) -> ParsedMessage | None:
        if self.role and self.content:
            return ParsedMessage(self.role, self.content, self.timestamp)
        return None


class _OpenWebUIHistory(_Export):
    messages: Detail[dict[str, OnErrorOmit[_OpenWebUIMessage]]] = None
    currentId: Detail[str] = None  # noqa: N815


class _OpenWebUIChat(_Export):
    history: Detail[_OpenWebUIHistory] = None
    messages: Detail[list[OnErrorOmit[_OpenWebUIMessage]]] = None
    id: Id = None
    title: Text = ""
    timestamp: Moment = None


class OpenWebUIConversation(_Export):
    chat: _OpenWebUIChat
    id: Id = None
    title: Text = ""
    created_at: Moment = None

    def parsed(self) -> ParsedConversation:
        chat = self.chat
        nodes = (chat.history.messages if chat.history else None) or {}
        node_id = chat.history.currentId if chat.history else None
        if node_id in nodes:
            # The branch shown last, as Open WebUI keeps regenerated answers as siblings.
            thread = []
            while node_id in nodes and len(thread) <= len(nodes):
                thread.append(nodes[node_id])
                node_id = nodes[node_id].parentId
            raw = list(reversed(thread))
        else:
            raw = chat.messages or []
        messages = [message.parsed() for message in raw]
        conversation = ParsedConversation(
            external_id="",
            title=self.title or chat.title,
            created_at=self.created_at or chat.timestamp,
            messages=[message for message in messages if message],
        )
        conversation.external_id = _external_id(self.id, chat.id, conversation=conversation)
        return conversation


_MODELS: dict[str, type[ChatGPTConversation | ClaudeConversation | OpenWebUIConversation]] = {
    CHATGPT: ChatGPTConversation,
    CLAUDE: ClaudeConversation,
    OPENWEBUI: OpenWebUIConversation,
}
