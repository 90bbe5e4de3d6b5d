from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.imports.formats import SOURCE_NAMES


class Import(models.Model):
    """One uploaded export, read into conversations a batch at a time, then learnt from."""

    class Source(models.TextChoices):
        CHATGPT = "chatgpt", SOURCE_NAMES["chatgpt"]
        CLAUDE = "claude", SOURCE_NAMES["claude"]
        OPENWEBUI = "openwebui", SOURCE_NAMES["openwebui"]

    class Status(models.TextChoices):
        RUNNING = "running", "Importing conversations"
        LEARNING = "learning", "Learning from them"
        DONE = "done", "Done"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="imports"
    )
    filename = models.CharField(max_length=255, blank=True)
    sha256 = models.CharField(max_length=64)
    source = models.CharField(max_length=16, choices=Source.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    conversations_total = models.PositiveIntegerField(default=0)
    conversations_done = models.PositiveIntegerField(default=0)
    conversations_added = models.PositiveIntegerField(default=0)
    messages_added = models.PositiveIntegerField(default=0)
    replies_total = models.PositiveIntegerField(default=0)
    replies_learnt = models.PositiveIntegerField(default=0)
    # The last imported reply learning has passed: the next batch starts after it.
    learn_cursor = models.BigIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Moved by every batch; an unfinished import whose heartbeat stopped lost its task.
    heartbeat_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "sha256"], name="import_once_per_file")
        ]

    def __str__(self) -> str:
        return f"{self.get_source_display()} import {self.filename}"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.RUNNING, self.Status.LEARNING)

    @property
    def percent(self) -> int:
        """Reading the conversations is the first half of the bar, learning the second."""
        if self.status == self.Status.DONE:
            return 100
        read = self.conversations_done / self.conversations_total if self.conversations_total else 0
        learnt = self.replies_learnt / self.replies_total if self.replies_total else 0
        if self.status == self.Status.RUNNING:
            return int(50 * read)
        return 50 + int(50 * learnt)


class PendingConversation(models.Model):
    """A parsed conversation of an import still to read (a formats.ParsedConversation dict),
    one row each so a batch loads only its own; deleted once read."""

    upload = models.ForeignKey(Import, on_delete=models.CASCADE, related_name="pending")
    position = models.PositiveIntegerField()
    data = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["upload", "position"], name="pending_once_per_place")
        ]

    def __str__(self) -> str:
        return f"{self.upload_id}:{self.position}"


class ImportedConversation(models.Model):
    """Which conversation an export's conversation became, so a later export of the same
    account adds only the messages that are new."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    source = models.CharField(max_length=16, choices=Import.Source.choices)
    external_id = models.CharField(max_length=255)
    conversation = models.ForeignKey(
        "chat.Conversation", on_delete=models.CASCADE, related_name="+"
    )
    message_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "source", "external_id"], name="imported_conversation_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.source}:{self.external_id}"
