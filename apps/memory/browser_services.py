"""Writes that people make to memory by hand: in the memory browser and in the admin.

Each one goes through the memory services where they exist and records an Event, so open
dashboards see a person's correction the same way they see the background tasks' work.
"""

from __future__ import annotations

from collections import defaultdict

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.core.models import Event
from apps.core.services import event_record, task_send_on_commit
from apps.language.text import visible
from apps.memory import forget_services, services
from apps.memory.embedding_services import embeddings_fill_later
from apps.memory.models import EmbeddingStatus, MemoryNode
from apps.memory.quarantine import looks_like_instruction


def _owners(owner_ids) -> dict:
    users = get_user_model().objects.in_bulk([pk for pk in owner_ids if pk is not None])
    return {pk: users.get(pk) for pk in owner_ids}


def _record_per_owner(
    *, kind: str, verb: str, rows: list[tuple[int, int | None]], action: str
) -> None:
    """One event per owner for a bulk change; `rows` are (node id, owner id)."""
    by_owner: dict[int | None, list[int]] = defaultdict(list)
    for node_id, owner_id in rows:
        by_owner[owner_id].append(node_id)
    owners = _owners(by_owner)
    for owner_id, node_ids in by_owner.items():
        count = len(node_ids)
        event_record(
            kind=kind,
            owner=owners[owner_id],
            summary=f"{verb} {count} memor{'y' if count == 1 else 'ies'}",
            payload={"action": action, "node_ids": node_ids},
        )


def memory_node_add(
    *,
    owner,
    description: str,
    vector: list[float] | None = None,
    embed: bool = True,
    **fields,
) -> MemoryNode:
    """A memory written by a person (the admin's add form, MCP's remember); one already held
    is confirmed instead (`restated` set on the node returned).

    `vector`: the caller's embedding of it, if it made one. Else it is embedded here, before
    the transaction opens, or, without `embed` (a caller already inside a transaction, as the
    admin's form is), by a task once that commits.
    """
    description = visible(description)
    if vector is None and embed:
        vector = services.memory_vector(description=description, topic=fields.get("topic", ""))
    with transaction.atomic():
        node = services.memory_node_create(
            owner=owner, description=description, vector=vector, embed=False, **fields
        )
        if getattr(node, "restated", False):
            summary = f"Told again, so I trust it more (now {round(node.confidence * 100)}%)"
            action = "confirm"
        else:
            summary, action = "A memory was added by hand", "add"
        event_record(
            kind=Event.Kind.EDIT,
            owner=owner,
            summary=f"{summary}: {node.description[:200]}",
            payload={"action": action, "node_id": node.pk, "text": node.description},
        )
    return node


@transaction.atomic
def memory_node_edit(
    *,
    node: MemoryNode,
    description: str,
    topic: str,
    kind: str,
    importance: float,
    hold_if_instruction: bool = False,
    **extra_fields,
) -> MemoryNode:
    """Change a memory's text or weight; a new text is embedded again (after commit).

    A new text goes through the instruction gate (apps.memory.quarantine) like every other
    write; `reads_as_instruction` on the node returned says whether it held it. With
    `hold_if_instruction` (the memory browser, where a memory says something about its owner)
    such a text waits for its owner's approval, as a memory from any other door would; the
    admin's form sets the state itself, so there the gate's word is a warning."""
    stored = MemoryNode.objects.only("topic", "description").get(pk=node.pk)
    old_text = stored.embedding_text
    node.description = visible(description).strip()
    node.topic = visible(topic).strip()
    changed = node.description != stored.description
    if changed:
        # The words are now the person's own, written by hand (apps.memory.provenance).
        node.source = MemoryNode.Source.ADMIN
    node.kind = kind
    node.importance = importance
    for name, value in extra_fields.items():
        setattr(node, name, value)
    node.reads_as_instruction = changed and looks_like_instruction(node.description)
    if node.reads_as_instruction and hold_if_instruction:
        node.state, node.fact_key = MemoryNode.State.QUARANTINED, ""
    if node.embedding_text != old_text:
        node.embedding = None
        node.embedding_status = EmbeddingStatus.PENDING
        embeddings_fill_later()
    node.full_clean(exclude=["owner", "source_message", "superseded_by", "embedding"])
    node.save()
    event_record(
        kind=Event.Kind.EDIT,
        owner=node.owner,
        summary=f"You edited a memory: {node.description[:200]}",
        payload={"action": "edit", "node_id": node.pk, "text": node.description},
    )
    return node


@transaction.atomic
def memory_nodes_forget(*, node_ids: list[int]) -> forget_services.ForgetReceipt:
    """Forget memories with their earlier versions, critiques, links and the events quoting
    them; the receipt says what went, and is itself recorded (it quotes no memory)."""
    by_owner: dict[int | None, list[int]] = defaultdict(list)
    for node_id, owner_id in MemoryNode.objects.filter(id__in=node_ids).values_list(
        "id", "owner_id"
    ):
        by_owner[owner_id].append(node_id)
    receipt = forget_services.memories_forget(node_ids=node_ids)
    owners = _owners(by_owner)
    for owner_id, ids in by_owner.items():
        # The receipt's totals are one owner's when only one owner's memories went (always, in
        # the memory browser); an admin's bulk delete over several owners gives each its count.
        summary = (
            receipt.sentence
            if len(by_owner) == 1
            else f"Forgot {len(ids)} memor{'y' if len(ids) == 1 else 'ies'}"
        )
        event_record(
            kind=Event.Kind.EDIT,
            owner=owners[owner_id],
            summary=summary,
            payload={"action": "forget", "node_ids": ids},
        )
    return receipt


@transaction.atomic
def confirmed_words(node: MemoryNode) -> str:
    """What the notice after a Confirm says, read before it: a held memory is approved."""
    return "Approved" if node.state == MemoryNode.State.QUARANTINED else "Confirmed"


def memory_node_confirm(*, node: MemoryNode) -> MemoryNode:
    """Someone vouches for a memory: one more point of confidence, as a critic's win gives.

    A quarantined memory (it read as an instruction to the assistant) is approved by it: it
    becomes an ordinary short-term memory, recalled from now on.
    """
    quarantined = MemoryNode.State.QUARANTINED
    approved = MemoryNode.objects.filter(pk=node.pk, state=quarantined).update(
        state=MemoryNode.State.VOLATILE
    )
    MemoryNode.objects.filter(pk=node.pk).update(
        confidence_score=F("confidence_score") + 1, last_accessed_at=timezone.now()
    )
    node.refresh_from_db(fields=["confidence_score", "last_accessed_at", "state"])
    said, action = (
        ("You approved this, so I use it now", "approve")
        if approved
        else ("You confirmed this, so I trust it more", "confirm")
    )
    event_record(
        kind=Event.Kind.EDIT,
        owner=node.owner,
        summary=f"{said} (now {round(node.confidence * 100)}%): {node.description[:200]}",
        payload={"action": action, "node_id": node.pk, "text": node.description},
    )
    return node


@transaction.atomic
def memory_node_mark_wrong(*, node: MemoryNode) -> MemoryNode:
    """A wrong memory stops being current (kept as superseded history, never used again), and
    so do the facts its turn taught that state it (see `forget_services._RESTATES`)."""
    MemoryNode.objects.filter(pk=node.pk, valid_to=None).update(valid_to=timezone.now())
    node.refresh_from_db(fields=["valid_to"])
    retracted = forget_services.triples_retract_restating(node=node)
    event_record(
        kind=Event.Kind.EDIT,
        owner=node.owner,
        summary=f"You said this is wrong, so I stopped using it: {node.description[:200]}",
        payload={
            "action": "wrong",
            "node_id": node.pk,
            "text": node.description,
            "triple_ids": retracted,
        },
    )
    return node


@transaction.atomic
def memory_nodes_promote(*, node_ids: list[int]) -> int:
    """Make volatile memories long-term now, without waiting for the critic's votes."""
    rows = list(
        MemoryNode.objects.filter(
            id__in=node_ids, state=MemoryNode.State.VOLATILE, valid_to=None
        ).values_list("id", "owner_id")
    )
    MemoryNode.objects.filter(id__in=[node_id for node_id, _ in rows]).update(
        state=MemoryNode.State.PROMOTED
    )
    _record_per_owner(
        kind=Event.Kind.PROMOTION, verb="Made long-term by hand:", rows=rows, action="promote"
    )
    return len(rows)


@transaction.atomic
def memory_nodes_reembed(*, node_ids: list[int]) -> int:
    count = MemoryNode.objects.filter(id__in=node_ids).update(
        embedding=None, embedding_status=EmbeddingStatus.PENDING
    )
    embeddings_fill_later()
    return count


def memory_nodes_criticise(*, node_ids: list[int]) -> int:
    """Ask the critic again about the turns that formed these memories; returns how many turns.

    The critic judges per turn (and once per node and turn), so memories without a source
    message, or already judged for that turn, are left as they are.
    """
    reply_ids = sorted(
        set(
            MemoryNode.objects.filter(id__in=node_ids, source_message__isnull=False).values_list(
                "source_message_id", flat=True
            )
        )
    )
    for reply_id in reply_ids:
        # The critic is cognition's, a layer above memory: its task is sent by name.
        task_send_on_commit("cognition.criticise", reply_id)
    return len(reply_ids)


@transaction.atomic
def triples_forget(*, owner, triple_ids: list[int]) -> int:
    count = forget_services.triples_forget(owner_id=owner.pk, triple_ids=triple_ids)
    if count:
        event_record(
            kind=Event.Kind.EDIT,
            owner=owner,
            summary=f"Forgot {count} fact{'s' if count != 1 else ''} of the knowledge graph",
            payload={"action": "forget", "triple_ids": triple_ids},
        )
    return count


@transaction.atomic
def episodes_forget(*, owner, episode_ids: list[int]) -> int:
    count = forget_services.episodes_forget(owner_id=owner.pk, episode_ids=episode_ids)
    if count:
        event_record(
            kind=Event.Kind.EDIT,
            owner=owner,
            summary=f"Forgot {count} episode{'s' if count != 1 else ''}",
            payload={"action": "forget", "episode_ids": episode_ids},
        )
    return count


@transaction.atomic
def memories_forget_all_recorded(*, owner) -> forget_services.ForgetReceipt:
    """A person's "forget everything": all the assistant knows about them goes (never global
    knowledge) with every row that quotes it, and the one event left is the receipt."""
    receipt = forget_services.memories_forget_of_owner(owner_id=owner.pk)
    event_record(
        kind=Event.Kind.EDIT,
        owner=owner,
        summary=f"Forgot everything. {receipt.sentence}",
        payload={"action": "forget_all", **receipt.as_dict()},
    )
    return receipt
