"""What the "What I used" panel names: the texts behind the ids an answer's trace keeps.

A trace stores ids and scores, never the texts themselves, so forgetting a memory takes it out
of every past answer's panel too; the texts are read as the panel is shown (one query per
kind for a whole conversation page).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Q

from apps.chat.models import Message
from apps.memory.models import Episode, MemoryNode, Triple
from apps.memory.renderer import knowledge_line


@dataclass
class Recalled:
    """Texts by id of what answers recalled, visible to the conversation's owner."""

    memories: dict[int, str]
    episodes: dict[int, str]
    triples: dict[int, str]


def _ids(messages: Iterable[Message], kind: str) -> set[int]:
    return {
        item["id"]
        for message in messages
        for item in ((message.trace or {}).get("memory") or {}).get(kind) or []
        if "id" in item
    }


def recalled_texts(*, conversation_id: int, messages: Iterable[Message]) -> Recalled:
    """The texts the answers of conversation `conversation_id` recalled: its owner's or global."""
    messages = list(messages)
    own_or_global = Q(owner__conversations=conversation_id) | Q(owner__isnull=True)
    # Current memories only: one marked wrong or forgotten since no longer shows.
    memories = MemoryNode.objects.filter(
        own_or_global, pk__in=_ids(messages, "memories"), valid_to=None
    )
    episodes = Episode.objects.filter(
        owner__conversations=conversation_id, pk__in=_ids(messages, "episodes")
    )
    triples = Triple.objects.filter(own_or_global, pk__in=_ids(messages, "triples"))
    return Recalled(
        memories=dict(memories.values_list("pk", "description")),
        episodes=dict(episodes.values_list("pk", "summary")),
        triples={
            triple.pk: knowledge_line(triple=triple, language="en").removeprefix("- ")
            for triple in triples.select_related("predicate")
        },
    )


def panel_items(trace: dict, recalled: Recalled) -> dict[str, list[tuple[str, float | None]]]:
    """(text, score) per kind for one answer, leaving out what has been forgotten since."""
    memory = trace.get("memory") or {}
    found = {}
    for kind, texts in (
        ("memories", recalled.memories),
        ("episodes", recalled.episodes),
        ("triples", recalled.triples),
    ):
        found[kind] = [
            (texts[item["id"]], item.get("score"))
            for item in memory.get(kind) or []
            if item.get("id") in texts
        ]
    return found
