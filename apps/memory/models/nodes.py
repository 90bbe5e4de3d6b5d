"""Memories (`MemoryNode`): one unit of knowledge each, its confidence on the facts' scale, the
count of each owner's current ones, and the links consolidation draws between them."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone
from pgvector.django import HalfVectorField, HnswIndex, VectorField

from apps.core.confidence import confidence_share
from apps.memory.models.columns import (
    SHORT_TEXT,
    EmbeddingStatus,
    owner_lexemes,
    stemmed_tsvector,
)


class MemoryNode(models.Model):
    """One unit of knowledge; volatile (short-term buffer) or promoted (long-term)."""

    class Kind(models.TextChoices):
        FACT = "fact", "Fact"
        PERSONA = "persona", "Persona"
        PREFERENCE = "preference", "Preference"
        RULE = "rule", "Rule"
        CONCEPT = "concept", "Concept"

    class State(models.TextChoices):
        VOLATILE = "volatile", "Short-term"
        PROMOTED = "promoted", "Long-term"
        # Reads as an instruction to the assistant: never recalled until its owner approves it.
        QUARANTINED = "quarantined", "Awaiting approval"

    class Source(models.TextChoices):
        USER = "user", "The user said it"
        INFERRED = "inferred", "Inferred by the assistant"
        ADMIN = "admin", "Written by hand"
        IMPORTED = "imported", "Imported"
        # `remember` over MCP: another agent's words about the user, not the user's.
        AGENT = "agent", "Sent by another agent"

    # Those that may shape the assistant's behaviour; the others are data (memory.provenance).
    BEHAVIOUR_SOURCES = frozenset({Source.USER, Source.ADMIN})

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="memory_nodes",
        help_text="Blank: global knowledge, shown to every user.",
    )
    description = models.TextField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FACT)
    topic = models.CharField(max_length=200, blank=True)
    fact_key = models.CharField(
        max_length=200,
        blank=True,
        help_text="Facts with the same key evolve one fact instead of piling up duplicates.",
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.VOLATILE)
    confidence_score = models.IntegerField(default=1)
    start_confidence = models.SmallIntegerField(
        default=1,
        db_default=1,
        help_text="The confidence it started with; decay forgets it unless raised above this.",
    )
    importance = models.FloatField(
        default=0.5, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )
    origin_context = models.TextField(blank=True)
    source = models.CharField(
        max_length=16,
        choices=Source.choices,
        default=Source.INFERRED,
        db_default=Source.INFERRED,
        help_text="Where the memory comes from: the user's own words, or not.",
    )
    # Rows written by set-based SQL (bulk loads, benchmarks) leave both to the database.
    quote = models.TextField(
        blank=True, db_default="", help_text="The user's words it comes from, as they wrote them."
    )
    source_message = models.ForeignKey(
        "chat.Message",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="memory_nodes",
    )
    embedding = VectorField(dimensions=settings.THALAMUS_EMBED_DIM, null=True, blank=True)
    # The vector in half precision, which the recall's exact scan reads from an index of its own
    # (memnode_owner_vectors). A trigger (migration 0010) keeps it for every writer, bulk SQL
    # and COPY included; empty above HALF_VECTOR_MAX_DIM dimensions, which that index cannot hold.
    embedding_half = HalfVectorField(null=True, blank=True, editable=False)
    embedding_status = models.CharField(
        max_length=16, choices=EmbeddingStatus.choices, default=EmbeddingStatus.PENDING
    )
    embedding_model = models.CharField(
        max_length=300, blank=True, help_text="Embedder and dimension that made the vector."
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_accessed_at = models.DateTimeField(null=True, blank=True)
    valid_from = models.DateTimeField(
        default=timezone.now,
        db_default=Now(),
        help_text="When this value began: its creation, or the change that gave it.",
    )
    valid_to = models.DateTimeField(
        null=True, blank=True, help_text="Set when a newer value superseded this one."
    )
    valid_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the fact itself stops being true (an exam tomorrow); decay closes it then.",
    )
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="history"
    )
    tsv = models.GeneratedField(
        expression=stemmed_tsvector("topic", "description", positions=False),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        indexes = [
            # The recall's full-text match reads an owner's short memories' words from the
            # B-tree (memnode_owner_recent_words), without the table, and only the long ones here.
            GinIndex(
                "owner",
                "tsv",
                name="memnode_owner_long_tsv",
                condition=Q(valid_to__isnull=True) & ~SHORT_TEXT,
            ),
            HnswIndex(
                name="memnode_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            models.Index(
                fields=["id"],
                name="memnode_embed_pending",
                condition=Q(embedding_status="pending"),
            ),
            # Promotion compares each candidate with its owner's current long-term memories.
            models.Index(
                fields=["owner"],
                name="memnode_owner_longterm",
                condition=Q(state="promoted", valid_to__isnull=True),
            ),
            # The recall's exact vector scan reads one owner's current vectors from here, all
            # together, without the table: at 1M rows the table's pages of one owner's 10k rows
            # cost 243 ms at p95 (bench/README.md).
            models.Index(
                fields=["owner"],
                include=["id", "kind", "embedding_half"],
                name="memnode_owner_vectors",
                condition=Q(valid_to__isnull=True),
            ),
            # The owner's short memories' words, newest first: the match reads a bounded window
            # of them without the table (memory 0013).
            models.Index(
                fields=["owner", "-created_at"],
                include=["id", "kind", "tsv"],
                name="memnode_owner_recent_words",
                condition=Q(valid_to__isnull=True) & SHORT_TEXT,
            ),
            # The long ones, newest first, for the same window.
            models.Index(
                fields=["owner", "-created_at"],
                name="memnode_owner_recent_long",
                condition=Q(valid_to__isnull=True) & ~SHORT_TEXT,
            ),
            # Which of a message's word forms an owner's current memories have at all (memory
            # 0011): the match above then tests each row against those few, not all forty-five.
            GinIndex(
                owner_lexemes("owner", "tsv"),
                name="memnode_owner_lexemes",
                condition=Q(valid_to__isnull=True),
                fastupdate=False,  # see memory 0011
            ),
            # How many memories an owner has, and their neighbours in time, without the table.
            models.Index(
                fields=["owner", "created_at"],
                include=["id", "kind"],
                name="memnode_owner_recent",
                condition=Q(valid_to__isnull=True),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "fact_key"],
                condition=Q(valid_to__isnull=True) & ~Q(fact_key=""),
                nulls_distinct=False,
                name="memnode_one_current_fact_per_key",
            ),
            models.CheckConstraint(
                condition=Q(importance__gte=0) & Q(importance__lte=1),
                name="memnode_importance_0_1",
            ),
        ]

    def __str__(self) -> str:
        return self.description[:80]

    @property
    def is_current(self) -> bool:
        return self.valid_to is None

    @property
    def embedding_text(self) -> str:
        return f"{self.topic}: {self.description}" if self.topic else self.description

    @property
    def is_data(self) -> bool:
        """Its provenance makes it data: used as a fact, never followed as an instruction."""
        return self.source not in self.BEHAVIOUR_SOURCES

    @property
    def confidence(self) -> float:
        """Its confidence on the one scale the pages show (a fact's, 0 to 1)."""
        return confidence_share(self.confidence_score)


# The owner key of the global memories' count: no user has id 0.
GLOBAL_COUNT_KEY = 0


class CurrentMemoryCount(models.Model):
    """How many current memories (valid_to empty) each owner has; key 0 counts the global ones.

    Kept by triggers on MemoryNode (memory 0012), so every writer keeps it, bulk SQL and COPY
    included. The recall reads it before each search to pick the exact or the HNSW path and to
    weigh words by their rarity: counting a heavy owner's 10k rows in an index took ~1.4 ms of
    every search (bench/README.md, Retrieval), this is one primary-key read.
    """

    owner_key = models.IntegerField(primary_key=True)
    rows = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.owner_key}: {self.rows}"


class MemoryLink(models.Model):
    class Kind(models.TextChoices):
        SIMILAR = "similar", "Similar"
        SUPPORTS = "supports", "Supports"
        CONTRADICTS = "contradicts", "Contradicts"

    source = models.ForeignKey(MemoryNode, on_delete=models.CASCADE, related_name="links_out")
    target = models.ForeignKey(MemoryNode, on_delete=models.CASCADE, related_name="links_in")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    score = models.FloatField(default=0.0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "target", "kind"], name="memlink_one_per_pair_kind"
            ),
            models.CheckConstraint(
                condition=~Q(source=models.F("target")), name="memlink_not_to_itself"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_id} {self.kind} {self.target_id}"
