"""Episodic memory: the summaries of stretches of conversation, and the stretches whose summary
failed."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from apps.memory.models.columns import EmbeddingStatus, stemmed_tsvector


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
        expression=stemmed_tsvector("summary", "decisions", "outcome", "lesson"),
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
