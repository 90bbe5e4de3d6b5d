"""The critic's verdicts on memories, one per memory and turn."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from apps.memory.models.nodes import MemoryNode


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
