"""What memory adds to a user's message (a `Note`), and the notes a turn replays from the
conversation's last answers (`conversation_replay`)."""

from __future__ import annotations

from dataclasses import dataclass, field

# What memory adds to a message stands before it, between these tags (the answer's system
# prompt says what they mean).
NOTE_OPEN = "<memory>"
NOTE_CLOSE = "</memory>"


@dataclass(frozen=True)
class Note:
    """What memory added to one user message, as the model saw it.

    The system prompt stays the same from turn to turn and what memory finds for a message
    goes with the message; a note is replayed verbatim with its message on later turns, so
    the server's prompt cache (llama.cpp's cache_prompt, Ollama's KV reuse) keeps the whole
    conversation and evaluates only what is new. The ids say what it quotes: a note quoting a
    memory that was forgotten, marked wrong or quarantined is no longer replayed.
    """

    text: str
    memories: tuple[int, ...] = ()
    triples: tuple[int, ...] = ()
    episodes: tuple[int, ...] = ()
    # The datamark its data was marked with (apps.memory.provenance).
    marker: str = ""

    def as_trace(self) -> dict:
        return {
            "text": self.text,
            "memories": list(self.memories),
            "triples": list(self.triples),
            "episodes": list(self.episodes),
            "marker": self.marker,
        }

    @classmethod
    def from_trace(cls, value: object) -> Note | None:
        if not isinstance(value, dict) or not isinstance(value.get("text"), str):
            return None
        ids = {}
        for name in ("memories", "triples", "episodes"):
            found = value.get(name) or []
            if not isinstance(found, list) or not all(isinstance(i, int) for i in found):
                return None
            ids[name] = tuple(found)
        marker = value.get("marker")
        return cls(value["text"], **ids, marker=marker if isinstance(marker, str) else "")

    def attached(self, content: str) -> str:
        """The message as sent: the note, then the user's words."""
        return f"{self.text}\n\n{content}"


def note_text(block: str) -> str:
    return f"{NOTE_OPEN}\n{block}\n{NOTE_CLOSE}"


@dataclass
class Replay:
    """What a turn takes from the conversation's last answers: the notes their messages were
    sent with, by message id (those whose every memory is still current), and the first
    message of the last one's history."""

    notes: dict[int, Note] = field(default_factory=dict)
    history_from: int = 0


def conversation_replay(*, conversation_id: int | None, limit: int, notes: bool) -> Replay:
    """The replay of the conversation's last `limit` answers; without `notes` (memory off),
    only where the history starts. A note marked with another datamark than the
    conversation's (written before datamarking, or under another secret key) is not
    replayed: its data would reach the prompt unmarked."""
    from apps.chat.selectors import reply_traces
    from apps.memory.provenance import conversation_marker
    from apps.memory.selectors import current_ids

    if conversation_id is None:
        return Replay()
    rows = reply_traces(conversation_id=conversation_id, limit=limit)
    history_from = next((value for _, _, value in rows if isinstance(value, int)), 0)
    marker = conversation_marker(conversation_id)
    found = {
        question_id: note
        for question_id, value, _ in rows
        if notes and (note := Note.from_trace(value)) is not None and note.marker == marker
    }
    if not found:
        return Replay(history_from=history_from)
    memories, triples, episodes = current_ids(
        memories={i for note in found.values() for i in note.memories},
        triples={i for note in found.values() for i in note.triples},
        episodes={i for note in found.values() for i in note.episodes},
    )
    current = {
        question_id: note
        for question_id, note in found.items()
        if memories.issuperset(note.memories)
        and triples.issuperset(note.triples)
        and episodes.issuperset(note.episodes)
    }
    return Replay(current, history_from)
