"""The knowledge graph: canonical relations (`Predicate`), the statements over them (`Triple`),
and the version that moves whenever an owner's graph does."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.core.categories import Category


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
