"""The memory receipt under an answer: what it recalled, what reflection learnt from it.

Counts come from the answer's trace; the memories themselves are read again (only the
conversation owner's, only current ones), so a memory forgotten since is no longer listed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from apps.chat.models import Message
from apps.memory.models import MemoryNode


@dataclass
class Receipt:
    message_id: int
    used: int
    # None until reflection has run on the answer.
    learned: int | None
    awaiting: int
    used_nodes: list[MemoryNode] = field(default_factory=list)
    learned_nodes: list[MemoryNode] = field(default_factory=list)

    @property
    def groups(self) -> list[tuple[str, list[MemoryNode]]]:
        return [
            (title, nodes)
            for title, nodes in [
                ("Used for this answer", self.used_nodes),
                ("Learned from this exchange", self.learned_nodes),
            ]
            if nodes
        ]


def _used_ids(message: Message) -> list[int]:
    hits = (message.trace.get("memory") or {}).get("memories") or []
    return [hit["id"] for hit in hits if "id" in hit]


def _learned_ids(message: Message) -> list[int]:
    outcome = message.trace.get("reflection") or {}
    return [
        *outcome.get("created", []),
        *outcome.get("updated", []),
        *outcome.get("quarantined", []),
    ]


def receipt_nodes(*, conversation_id: int, messages: Iterable[Message]) -> dict[int, MemoryNode]:
    """The current memories the receipts of these answers name, of the conversation's owner."""
    ids = {pk for message in messages for pk in [*_used_ids(message), *_learned_ids(message)]}
    if not ids:
        return {}
    nodes = MemoryNode.objects.filter(
        pk__in=ids, owner__conversations=conversation_id, valid_to=None
    ).only("pk", "description", "source", "state", "confidence_score", "topic")
    return {node.pk: node for node in nodes}


def receipt_for(message: Message, nodes: dict[int, MemoryNode]) -> Receipt:
    outcome = message.trace.get("reflection")
    reflected = bool(outcome) and not outcome.get("failed") and "created" in outcome
    learned_ids = _learned_ids(message)
    return Receipt(
        message_id=message.pk,
        used=len(_used_ids(message)),
        learned=len(outcome["created"]) + len(outcome.get("updated", [])) if reflected else None,
        awaiting=len(outcome.get("quarantined", [])) if reflected else 0,
        used_nodes=[nodes[pk] for pk in _used_ids(message) if pk in nodes],
        learned_nodes=[nodes[pk] for pk in dict.fromkeys(learned_ids) if pk in nodes],
    )
