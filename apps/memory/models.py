from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce, Now
from django.db.models.lookups import LessThanOrEqual
from django.utils import timezone
from pgvector.django import HalfVectorField, HnswIndex, VectorField

from apps.core.categories import Category

# The renderer's languages, whose snowball stemmers make the words of the full text: a word is
# kept in each language's stem ("studies" → "studi", "stud", "studies"), so that a message in any
# of them finds its other forms ("study" → "studi"). Irregular ones ("ran", "run") are found by
# the query's dictionary forms and their irregular forms (query_text.query_variants).
STEMMED_LANGUAGES = ("english", "italian", "german", "french", "spanish")


def _tsvector(*fields: str, positions: bool = True) -> models.Func:
    """The words of text columns, stemmed in each of STEMMED_LANGUAGES; `||` keeps it immutable
    (generated), CONCAT doesn't. Without positions where nothing ranks by them: smaller."""
    stemmed = [
        models.Func(
            models.Func(
                *[Coalesce(name, models.Value("")) for name in fields],
                template="%(expressions)s",
                arg_joiner=" || ' ' || ",
            ),
            template=f"to_tsvector('{language}'::regconfig, %(expressions)s)",
        )
        for language in STEMMED_LANGUAGES
    ]
    return models.Func(
        *stemmed,
        template="(%(expressions)s)" if positions else "strip(%(expressions)s)",
        arg_joiner=" || ",
        output_field=SearchVectorField(),
    )


def owner_lexemes(owner: str, words: str) -> models.Func:
    """The words of `words` prefixed with their owner ("42~paint", "g~paint" for global ones)."""
    return models.Func(
        models.F(owner),
        models.F(words),
        function="memory_owner_lexemes",
        output_field=ArrayField(models.TextField()),
    )


# A B-tree entry holds at most 2,704 bytes: a half-precision vector of up to this many dimensions
# fits next to its owner, id and kind.
HALF_VECTOR_MAX_DIM = 1280


# Memories whose words fit a B-tree entry: up to this many bytes of topic and description make a
# tsvector of at most about 2.3 kB, under the entry's 2,704 bytes, even for words each of the five
# stemmers cuts differently (3.2 kB for 490 bytes of them, tests/memory/test_recall_scale.py).
SHORT_TEXT_MAX_BYTES = 360
SHORT_TEXT = Q(
    LessThanOrEqual(
        models.Func("topic", function="octet_length", output_field=models.IntegerField())
        + models.Func("description", function="octet_length", output_field=models.IntegerField()),
        SHORT_TEXT_MAX_BYTES,
    )
)


def confidence_share(score: int) -> float:
    """A memory's confidence score (its votes: confirmations and the critic's verdicts) on the
    facts' 0 to 1 scale, as the recall weighs it (search_selectors' `confidence`): a new memory
    (1) is a third, one confirmation makes it a half, and it nears 1 as votes add up."""
    votes = max(score, 0)
    return votes / (votes + 2)


def score_at_least(percent: int) -> int:
    """The lowest score whose share is at least `percent` (below 100): s / (s + 2) >= p / 100."""
    return -(-2 * percent // (100 - percent))


def score_at_most(percent: int) -> int:
    """The highest score whose share is at most `percent` (below 100)."""
    return 2 * percent // (100 - percent)


class EmbeddingStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class MemoryNode(models.Model):
    """One unit of knowledge; volatile (short-term buffer) or promoted (long-term)."""

    class Kind(models.TextChoices):
        FACT = "fact", "Fact"
        PERSONA = "persona", "Persona"
        PREFERENCE = "preference", "Preference"
        RULE = "rule", "Rule"
        CONCEPT = "concept", "Concept"

    class State(models.TextChoices):
        VOLATILE = "volatile", "Volatile"
        PROMOTED = "promoted", "Promoted"
        # Reads as an instruction to the assistant: never recalled until its owner approves it.
        QUARANTINED = "quarantined", "Awaiting approval"

    class Source(models.TextChoices):
        USER = "user", "The user said it"
        INFERRED = "inferred", "Inferred by the assistant"
        ADMIN = "admin", "Added by an admin"
        IMPORTED = "imported", "Imported"

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
        expression=_tsvector("topic", "description", positions=False),
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


class KnowledgeVersion(models.Model):
    """A number that changes whenever an owner's knowledge graph does; key 0 for the global one.

    Kept by triggers on Triple and Predicate (memory 0016), from one sequence, so every writer
    moves it, bulk SQL and COPY included, and no value ever comes back (not after a rollback,
    not after a TRUNCATE, which moves key 0). The turn keeps the graph it last read in memory
    and reads it again only when the owner's or the global version has moved: reading and
    building 200 triples was ~4 ms of a heavy user's 16 ms turn context (bench/README.md).
    An owner without a row has not had a triple written since the versions began.
    """

    owner_key = models.IntegerField(primary_key=True)
    version = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.owner_key}: {self.version}"


class Episode(models.Model):
    """Episodic memory: what happened in a stretch of conversation and what was learnt."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="episodes"
    )
    conversation = models.ForeignKey(
        "chat.Conversation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="episodes",
    )
    summary = models.TextField()
    decisions = models.TextField(blank=True)
    outcome = models.TextField(blank=True)
    lesson = models.TextField(blank=True)
    messages = models.ManyToManyField("chat.Message", blank=True, related_name="episodes")
    embedding = VectorField(dimensions=settings.THALAMUS_EMBED_DIM, null=True, blank=True)
    embedding_status = models.CharField(
        max_length=16, choices=EmbeddingStatus.choices, default=EmbeddingStatus.PENDING
    )
    embedding_model = models.CharField(max_length=300, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)
    tsv = models.GeneratedField(
        expression=_tsvector("summary", "decisions", "outcome", "lesson"),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        indexes = [
            models.Index(fields=["owner", "-ended_at"], name="episode_owner_recent"),
            GinIndex("owner", "tsv", name="episode_owner_tsv"),
            HnswIndex(
                name="episode_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return self.summary[:80]

    @property
    def embedding_text(self) -> str:
        parts = [self.summary, self.decisions, self.outcome, self.lesson]
        return "\n".join(part for part in parts if part)


class EpisodeFailure(models.Model):
    """A stretch of conversation whose summary failed every attempt.

    The sweep and the turns pass the stretch by; only messages after `through_message_id`
    make the conversation due again (with the failed stretch still in the next try).
    """

    conversation = models.OneToOneField(
        "chat.Conversation", on_delete=models.CASCADE, related_name="episode_failure"
    )
    through_message_id = models.BigIntegerField()
    attempts = models.PositiveSmallIntegerField()
    error = models.TextField()
    failed_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"conversation {self.conversation_id} through message {self.through_message_id}"


class Predicate(models.Model):
    """A canonical relation name; aliases written by the LLM map onto it."""

    name = models.CharField(max_length=100, unique=True)
    category = models.CharField(max_length=32, choices=Category.choices, default=Category.KNOWLEDGE)
    aliases = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    labels = models.JSONField(
        default=dict, blank=True, help_text='Per language, e.g. {"en": "Name", "it": "Nome"}.'
    )
    single_valued = models.BooleanField(
        default=False, help_text="A new value replaces the old one (a name, an age)."
    )

    class Meta:
        indexes = [GinIndex(fields=["aliases"], name="predicate_aliases")]

    def __str__(self) -> str:
        return self.name

    @property
    def english_label(self) -> str:
        """Its label in English: the pages' language (a template cannot pass one)."""
        return self.label("en")

    def label(self, language: str) -> str:
        return (
            self.labels.get(language)
            or self.labels.get("en")
            or self.name.removeprefix("has_").removeprefix("is_").replace("_", " ").capitalize()
        )


class Triple(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="triples",
    )
    subject = models.CharField(max_length=200)
    predicate = models.ForeignKey(Predicate, on_delete=models.PROTECT, related_name="triples")
    object = models.TextField()
    category = models.CharField(max_length=32, choices=Category.choices, default=Category.KNOWLEDGE)
    confidence = models.FloatField(
        default=0.5, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )
    provenance = models.TextField(blank=True)
    source_message = models.ForeignKey(
        "chat.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="triples"
    )
    valid_from = models.DateTimeField(default=timezone.now)
    valid_to = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["owner", "category"], name="triple_owner_category"),
            # The renderer's order of an owner's current triples, read without the table; only
            # the ones shown are then fetched.
            models.Index(
                fields=["owner", "category", "predicate", "-confidence", "id"],
                name="triple_owner_known",
                condition=Q(valid_to__isnull=True),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "subject", "predicate", "object"],
                condition=Q(valid_to__isnull=True),
                nulls_distinct=False,
                name="triple_one_current_statement",
            )
        ]

    def __str__(self) -> str:
        return f"{self.subject} {self.predicate_id} {self.object}"


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


class RetrievalPlan(models.Model):
    """What to retrieve on the conversation's next turn; written by reflection."""

    conversation = models.OneToOneField(
        "chat.Conversation", on_delete=models.CASCADE, related_name="retrieval_plan"
    )
    steps = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Retrieval plan of conversation {self.conversation_id}"


class Critique(models.Model):
    """The critic's written debate over one node and its verdict, for one turn."""

    class Verdict(models.TextChoices):
        WITHSTANDS = "withstands", "Withstands"
        FAILS = "fails", "Fails"

    node = models.ForeignKey(MemoryNode, on_delete=models.CASCADE, related_name="critiques")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="critiques",
    )
    message = models.ForeignKey(
        "chat.Message",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="critiques",
        help_text="The turn that prompted the critique.",
    )
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    debate = models.TextField()
    delta = models.SmallIntegerField(help_text="What the verdict did to the confidence score.")
    model = models.CharField(max_length=200, blank=True)
    contradicts = ArrayField(models.BigIntegerField(), default=list, blank=True)
    supports = ArrayField(models.BigIntegerField(), default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # A redelivered critic task must not count its verdict twice.
            models.UniqueConstraint(fields=["node", "message"], name="critique_once_per_turn")
        ]

    def __str__(self) -> str:
        return f"{self.verdict}: {self.node_id}"


# What the world state holds at most: it is rendered into every system prompt.
WORLD_MAX_TOPICS = 8
WORLD_MAX_GOALS = 10
WORLD_MAX_BEHAVIOUR = 10
WORLD_MAX_CHARS = 200


class WorldState(models.Model):
    """What the conversation with one user is about now and how they want to be answered.

    Changed only through `world_apply`'s validated operations; `version` counts its changes.
    """

    LIMITS = {
        "topics": WORLD_MAX_TOPICS,
        "goals": WORLD_MAX_GOALS,
        "behaviour": WORLD_MAX_BEHAVIOUR,
    }

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="world_state"
    )
    topics = models.JSONField(default=list, blank=True, help_text="What the talk is about now.")
    project = models.CharField(max_length=WORLD_MAX_CHARS, blank=True)
    goals = models.JSONField(default=list, blank=True)
    behaviour = models.JSONField(
        default=list, blank=True, help_text="How the user wants the assistant to answer."
    )
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"World state of user {self.owner_id} (v{self.version})"

    @property
    def is_empty(self) -> bool:
        return not (self.topics or self.project or self.goals or self.behaviour)

    def as_dict(self) -> dict:
        return {
            "topics": list(self.topics),
            "project": self.project,
            "goals": list(self.goals),
            "behaviour": list(self.behaviour),
        }
