"""Writes that people make to memory by hand: in the memory browser and in the admin.

Each one goes through the memory services where they exist and records an Event, so open
dashboards see a person's correction the same way they see the background tasks' work.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from apps.core.models import Event
from apps.core.services import event_record, task_send_on_commit
from apps.core.validation import StorableText
from apps.memory import forget_services, services
from apps.memory.embedding_services import embeddings_fill_later
from apps.memory.models import Category, EmbeddingStatus, Episode, MemoryNode, Triple
from apps.memory.schemas import normal_text

EXPORT_FORMAT = "thalamus-memories/1"
TRIPLE_TEXT_MAX_BYTES = 2_600


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
    **extra_fields,
) -> MemoryNode:
    """Change a memory's text or weight; a new text is embedded again (after commit)."""
    stored = MemoryNode.objects.only("topic", "description").get(pk=node.pk)
    old_text = stored.embedding_text
    node.description = description.strip()
    node.topic = topic.strip()
    node.kind = kind
    node.importance = importance
    for name, value in extra_fields.items():
        setattr(node, name, value)
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
        kind=Event.Kind.PROMOTION, verb="Promoted by hand", rows=rows, action="promote"
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


# The export file. Ids are not exported: an import always creates rows of the importer. Its text
# is kept as PostgreSQL can store it, and every number within what its column holds.


class ExportedNode(BaseModel):
    model_config = ConfigDict(extra="ignore")

    description: StorableText = Field(min_length=1)
    kind: MemoryNode.Kind = MemoryNode.Kind.FACT
    topic: StorableText = Field(default="", max_length=200)
    fact_key: StorableText = Field(default="", max_length=200)
    state: MemoryNode.State = MemoryNode.State.VOLATILE
    # start_confidence, which an imported memory starts with, is a smallint.
    confidence_score: int = Field(default=1, ge=-32768, le=32767)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    origin_context: StorableText = ""
    created_at: datetime | None = None


class ExportedEpisode(BaseModel):
    model_config = ConfigDict(extra="ignore")

    summary: StorableText = Field(min_length=1)
    decisions: StorableText = ""
    outcome: StorableText = ""
    lesson: StorableText = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None


class ExportedTriple(BaseModel):
    model_config = ConfigDict(extra="ignore")

    subject: StorableText = Field(min_length=1, max_length=200)
    predicate: StorableText = Field(min_length=1, max_length=100)
    object: StorableText = Field(min_length=1)
    category: Category | None = None
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    provenance: StorableText = ""

    @model_validator(mode="after")
    def _fits_one_index_entry(self) -> ExportedTriple:
        # A current triple's subject and object share one B-tree entry (its uniqueness), which
        # PostgreSQL caps at 2,704 bytes: every stored triple fits, so an export always does.
        if len(self.subject.encode()) + len(self.object.encode()) > TRIPLE_TEXT_MAX_BYTES:
            raise PydanticCustomError("text_too_long", "subject and object are too long")
        return self


class MemoryExport(BaseModel):
    model_config = ConfigDict(extra="ignore")

    format: str = EXPORT_FORMAT
    memories: list[ExportedNode] = Field(default_factory=list)
    episodes: list[ExportedEpisode] = Field(default_factory=list)
    triples: list[ExportedTriple] = Field(default_factory=list)


@dataclass
class MemoryImportReceipt:
    """What an imported file added, and what of it was already known, per kind of row."""

    added: dict[str, int]
    known: dict[str, int]
    # Quarantined memories the file's instruction-like texts became.
    held: int = 0

    _WORDS = {
        "memories": ("memory", "memories"),
        "episodes": ("episode", "episodes"),
        "triples": ("fact", "facts"),
    }

    @property
    def sentence(self) -> str:
        """ "Imported 1 memory; 1 was already known.", "Imported 2 memories and 1 fact.",
        "Nothing new: 2 memories and 1 episode were already known.", each followed by how many
        texts wait for approval, if any."""
        if not self.held:
            return self._added_and_known()
        reads = "reads as an instruction" if self.held == 1 else "read as instructions"
        them = "it" if self.held == 1 else "them"
        return f"{self._added_and_known()} {self.held} {reads}: approve or delete {them} below."

    def _added_and_known(self) -> str:
        added, known = self._counted(self.added), self._counted(self.known)
        were = "was" if sum(self.known.values()) == 1 else "were"
        if added and known:
            same_kind = len(self._kinds(self.added) | self._kinds(self.known)) == 1
            known = str(sum(self.known.values())) if same_kind else known
            return f"Imported {added}; {known} {were} already known."
        if added:
            return f"Imported {added}."
        if known:
            return f"Nothing new: {known} {were} already known."
        return "The file holds no memories, episodes or facts."

    def _counted(self, counts: dict[str, int]) -> str:
        parts = [f"{n} {self._WORDS[name][n != 1]}" for name, n in counts.items() if n]
        return " and ".join(parts) if len(parts) < 3 else f"{parts[0]}, {parts[1]} and {parts[2]}"

    @staticmethod
    def _kinds(counts: dict[str, int]) -> set[str]:
        return {name for name, n in counts.items() if n}


def memories_export(*, owner) -> dict:
    """Everything current that the assistant knows about one person, as JSON-ready data."""
    nodes = MemoryNode.objects.filter(owner=owner, valid_to=None).order_by("created_at", "id")
    episodes = Episode.objects.filter(owner=owner).order_by("started_at", "id")
    triples = (
        Triple.objects.filter(owner=owner, valid_to=None)
        .select_related("predicate")
        .order_by("valid_from", "id")
    )
    export = MemoryExport(
        memories=[ExportedNode.model_validate(node, from_attributes=True) for node in nodes],
        episodes=[ExportedEpisode.model_validate(e, from_attributes=True) for e in episodes],
        triples=[
            ExportedTriple(
                subject=t.subject,
                predicate=t.predicate.name,
                object=t.object,
                category=t.category,
                confidence=t.confidence,
                provenance=t.provenance,
            )
            for t in triples
        ],
    )
    return {"exported_at": timezone.now().isoformat(), **export.model_dump(mode="json")}


# What an imported memory starts at: the confidence reflection gives a new memory.
IMPORTED_CONFIDENCE = 1


def _held_count(owner) -> int:
    return MemoryNode.objects.filter(
        owner=owner, state=MemoryNode.State.QUARANTINED, valid_to=None
    ).count()


@transaction.atomic
def memories_import(*, owner, data) -> MemoryImportReceipt:
    """Load an export back; raises pydantic.ValidationError on a malformed file, writing nothing.

    Facts with a fact_key evolve the current value as any new memory does, and restated triples
    only raise their confidence, so importing the same file twice adds nothing the second time
    (and the receipt says each was already known).

    A file is not the user's word: its memories arrive volatile at the starting confidence,
    whatever state and confidence it gives them, and pass the same gate as every other write
    (apps.memory.quarantine): what reads as an instruction is held for the user's approval.
    """
    export = MemoryExport.model_validate(data)
    added = {"memories": 0, "episodes": 0, "triples": 0}
    held_before = _held_count(owner)
    known_nodes = {
        normal_text(text)
        for text in MemoryNode.objects.filter(owner=owner, valid_to=None).values_list(
            "description", flat=True
        )
    }
    for item in export.memories:
        if normal_text(item.description) in known_nodes:
            continue
        known_nodes.add(normal_text(item.description))
        node = services.memory_node_create(
            owner=owner,
            embed=False,
            source=MemoryNode.Source.IMPORTED,
            confidence_score=IMPORTED_CONFIDENCE,
            **item.model_dump(exclude={"created_at", "state", "confidence_score"}),
        )
        if getattr(node, "restated", False):
            continue
        if item.created_at:
            MemoryNode.objects.filter(pk=node.pk).update(created_at=item.created_at)
        added["memories"] += 1
    known_episodes = {
        normal_text(text)
        for text in Episode.objects.filter(owner=owner).values_list("summary", flat=True)
    }
    for item in export.episodes:
        if normal_text(item.summary) not in known_episodes:
            known_episodes.add(normal_text(item.summary))
            services.episode_create(
                owner=owner, embed=False, source=MemoryNode.Source.IMPORTED, **item.model_dump()
            )
            added["episodes"] += 1
    # A restated triple only raises its confidence; a new one (or a single-valued one's new
    # value, which closes the old) is a new row.
    triples_before = Triple.objects.filter(owner=owner).count()
    in_file_held = 0
    for item in export.triples:
        try:
            services.triple_upsert(
                owner=owner, source=MemoryNode.Source.IMPORTED, **item.model_dump()
            )
        except services.TripleHeld:
            in_file_held += 1
    added["triples"] = Triple.objects.filter(owner=owner).count() - triples_before
    in_file = {
        "memories": len(export.memories),
        "episodes": len(export.episodes),
        "triples": len(export.triples) - in_file_held,
    }
    receipt = MemoryImportReceipt(
        added=added,
        known={name: in_file[name] - added[name] for name in added},
        held=_held_count(owner) - held_before,
    )
    event_record(
        kind=Event.Kind.EDIT,
        owner=owner,
        summary=receipt.sentence,
        payload={"action": "import", "added": receipt.added, "known": receipt.known},
    )
    return receipt
