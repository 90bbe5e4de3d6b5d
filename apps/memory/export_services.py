"""A person's memories as a file: exported from the memory browser and imported back, through
the same services and quarantine gate as every other write."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from apps.core.models import Event
from apps.core.services import event_record
from apps.core.validation import StorableText
from apps.memory import episode_services, graph_services, services
from apps.memory.models import Category, Episode, MemoryNode, Triple
from apps.memory.schemas import normal_text

EXPORT_FORMAT = "thalamus-memories/1"
TRIPLE_TEXT_MAX_BYTES = 2_600


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


def another_kind_of_object(data: object) -> bool:
    """Whether parsed JSON is an object with none of an export's keys: it would validate as an
    empty export (every field has a default). Anything but an object fails validation."""
    return isinstance(data, dict) and not set(MemoryExport.model_fields) & data.keys()


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
    def holds_anything(self) -> bool:
        return bool(sum(self.added.values()) or sum(self.known.values()) or self.held)

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
# What a file may say of a memory; its fact key, importance, state and confidence are not the
# user's word, and are left at what any new memory gets.
_IMPORTED_FIELDS = {"description", "kind", "topic", "origin_context"}


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

    A file is not the user's word: its memories arrive imported, volatile, at the starting
    confidence and the default importance, without a fact key (so a file cannot replace the
    name the user stated), whatever it says of them; and pass the same gate as every other
    write (apps.memory.quarantine): what reads as an instruction is held for the user's approval.
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
            **item.model_dump(include=_IMPORTED_FIELDS),
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
            episode_services.episode_create(
                owner=owner, embed=False, source=MemoryNode.Source.IMPORTED, **item.model_dump()
            )
            added["episodes"] += 1
    # A restated triple only raises its confidence; a new one (or a single-valued one's new
    # value, which closes the old) is a new row.
    triples_before = Triple.objects.filter(owner=owner).count()
    in_file_held = 0
    for item in export.triples:
        try:
            graph_services.triple_upsert(
                owner=owner, source=MemoryNode.Source.IMPORTED, **item.model_dump()
            )
        except graph_services.TripleHeld:
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
