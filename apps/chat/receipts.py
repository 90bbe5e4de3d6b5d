"""The memory receipt under an answer: what it recalled, what reflection learnt from it.

The answer's trace names what it recalled; the memories themselves are read again (only the
conversation owner's, only current ones), and the receipt counts what it lists, so a memory
forgotten since is neither listed nor counted. Global knowledge is shown apart, as shared
facts: it is no one's memory and the user cannot correct it here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from apps.chat.models import Message
from apps.chat.recall import Recalled
from apps.chat.turn_status import learns_nothing
from apps.memory.models import MemoryNode
from apps.memory.schemas import same_text

# What found a memory reflection wrote (the outcome's `found_by`), as the receipt says it.
FOUND_BY_WORDS = {"rules": "found by rules", "model": "found by the model", "both": "rules + model"}


@dataclass
class Proposal:
    """A new value of a fact the user stated once, weakly: it waits for their confirmation."""

    index: int
    description: str
    quote: str
    current: MemoryNode


@dataclass
class Receipt:
    message_id: int
    # None until reflection has run on the answer.
    learned: int | None
    awaiting: int
    # A temporary chat, or memory off for the turn: reflection never reads the answer.
    learns_nothing: bool = False
    used_nodes: list[MemoryNode] = field(default_factory=list)
    # The user's facts and past conversations it recalled, by text: nothing to correct here.
    used_texts: list[str] = field(default_factory=list)
    shared_texts: list[str] = field(default_factory=list)
    learned_nodes: list[MemoryNode] = field(default_factory=list)
    # Memories the user's message said again: confirmed, not added a second time.
    confirmed_nodes: list[MemoryNode] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)
    # Memory id: what found it (FOUND_BY_WORDS), for what this exchange taught.
    found_by: dict[int, str] = field(default_factory=dict)

    @property
    def used(self) -> int:
        return len(self.used_nodes) + len(self.used_texts)

    @property
    def shared(self) -> int:
        return len(self.shared_texts)

    @property
    def groups(self) -> list[tuple[str, list[tuple[MemoryNode, str]]]]:
        """Each group's memories, each with what found it ("" for those recalled)."""
        return [
            (title, [(node, self.found_by.get(node.pk, "") if found else "") for node in nodes])
            for title, nodes, found in [
                ("Used for this answer", self.used_nodes, False),
                ("Learned from this exchange", self.learned_nodes, True),
                ("Confirmed by this exchange", self.confirmed_nodes, True),
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


def _confirmed_ids(message: Message) -> list[int]:
    return (message.trace.get("reflection") or {}).get("confirmed") or []


def _pending_proposals(message: Message) -> list[tuple[int, dict]]:
    proposals = (message.trace.get("reflection") or {}).get("proposed") or []
    return [(index, p) for index, p in enumerate(proposals) if p.get("state") == "pending"]


def receipt_nodes(*, conversation_id: int, messages: Iterable[Message]) -> dict[int, MemoryNode]:
    """The current memories the receipts of these answers name, of the conversation's owner."""
    ids = {
        pk
        for message in messages
        for pk in [
            *_used_ids(message),
            *_learned_ids(message),
            *_confirmed_ids(message),
            *(proposal["replaces"] for _, proposal in _pending_proposals(message)),
        ]
    }
    if not ids:
        return {}
    nodes = MemoryNode.objects.filter(
        pk__in=ids, owner__conversations=conversation_id, valid_to=None
    ).only("pk", "description", "source", "state", "confidence_score", "topic")
    return {node.pk: node for node in nodes}


def _restates(value: str, used: list[MemoryNode]) -> bool:
    """Whether a fact's value stands, as words, in a memory the receipt lists already ("Lives
    in: Ghent" beside "The user lives in Ghent"): one thing, counted and listed once."""
    words = value.casefold().split()
    return bool(words) and any(
        re.search(
            rf"(?<!\w){re.escape(' '.join(words))}(?!\w)",
            " ".join(n.description.casefold().split()),
        )
        for n in used
    )


def receipt_for(message: Message, nodes: dict[int, MemoryNode], recalled: Recalled) -> Receipt:
    """`nodes` are the owner's current memories (receipt_nodes); `recalled` the texts of what
    the answers recalled, the owner's or global (recall.recalled_texts)."""
    outcome = message.trace.get("reflection")
    reflected = bool(outcome) and not outcome.get("failed") and "created" in outcome
    learned_ids = _learned_ids(message)
    memory = message.trace.get("memory") or {}
    used_nodes = [nodes[pk] for pk in _used_ids(message) if pk in nodes]
    used_texts, shared_texts = [], []
    for item in memory.get("memories") or []:
        # Current and the owner's or global: a global one, as only the owner's are in `nodes`.
        # A global rule is an instruction to the assistant, no fact to show as one.
        pk = item.get("id")
        if pk in recalled.memories and pk not in nodes and pk not in recalled.instructions:
            shared_texts.append(recalled.memories[pk])
    for item in memory.get("triples") or []:
        pk = item.get("id")
        if pk not in recalled.triples:
            continue
        if item.get("global"):
            shared_texts.append(recalled.triples[pk])
        elif not _restates(recalled.triple_values.get(pk, ""), used_nodes):
            used_texts.append(recalled.triples[pk])
    for item in memory.get("episodes") or []:
        if item.get("id") in recalled.episodes:
            used_texts.append(recalled.episodes[item["id"]])
    learned_nodes = [nodes[pk] for pk in dict.fromkeys(learned_ids) if pk in nodes]
    awaiting = sum(1 for node in learned_nodes if node.state == MemoryNode.State.QUARANTINED)
    # A proposal whose fact was forgotten, or already holds its value, asks nothing any more.
    proposals = [
        Proposal(index, proposal["description"], proposal["quote"], nodes[proposal["replaces"]])
        for index, proposal in _pending_proposals(message)
        if proposal["replaces"] in nodes
        and not same_text(nodes[proposal["replaces"]].description, proposal["description"])
    ]
    found = (outcome or {}).get("found_by") or {}
    found_by = {int(pk): FOUND_BY_WORDS.get(by, by) for pk, by in found.items()}
    return Receipt(
        message_id=message.pk,
        learned=len(learned_nodes) - awaiting if reflected else None,
        awaiting=awaiting if reflected else 0,
        learns_nothing=learns_nothing(message),
        used_nodes=used_nodes,
        used_texts=used_texts,
        shared_texts=shared_texts,
        learned_nodes=learned_nodes,
        confirmed_nodes=[nodes[pk] for pk in _confirmed_ids(message) if pk in nodes],
        proposals=proposals,
        found_by=found_by,
    )
