from __future__ import annotations

import re
from datetime import timedelta

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models.functions import MD5, Coalesce

# How long a temporary chat lives after it was started.
TEMPORARY_LIFETIME = timedelta(hours=24)
TITLE_FALLBACK_CHARS = 60
# Where a sentence of the user's ends: ".", "!", "?" or "…" before a space.
_SENTENCE_END = re.compile(r"[.!?…](?=\s)")


def fallback_title(text: str) -> str:
    """The user's first words, what an untitled conversation is called (and its title when the
    model gives none): their first line as they wrote it, punctuation kept; longer than
    TITLE_FALLBACK_CHARS, it ends with the last sentence that fits ("Hi! My name is Laura."), or
    else at the last word that fits, with an ellipsis."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    line = " ".join(line.split())
    if len(line) <= TITLE_FALLBACK_CHARS:
        return line
    head = line[: TITLE_FALLBACK_CHARS + 1]
    ends = [match.end() for match in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= TITLE_FALLBACK_CHARS // 3:
        return head[: ends[-1]]
    cut = head.rsplit(" ", 1)[0] if " " in head else line[:TITLE_FALLBACK_CHARS]
    return cut.rstrip(",;:-–— ") + "…"


class Conversation(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=200, blank=True)
    # When the title task claimed the asking of the LLM for a title (it is asked once).
    title_asked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # A temporary chat reads and writes no memory and is deleted TEMPORARY_LIFETIME after it
    # was started (chat.delete_expired_temporary, every 15 minutes).
    temporary = models.BooleanField(default=False)
    # Started by a client of the OpenAI-compatible API (/v1), not in the browser.
    via_api = models.BooleanField(default=False, db_default=False)
    # The chat model the user picked for this conversation; blank for the configured one.
    chat_model = models.CharField(max_length=200, blank=True, default="", db_default="")

    class Meta:
        indexes = [models.Index(fields=["owner", "-updated_at"], name="conv_owner_recent")]

    def __str__(self) -> str:
        return self.display_title

    @property
    def display_title(self) -> str:
        """Its title; until the model's lands (asked once the conversation goes quiet), the
        user's first words, which the selectors read with it (`opening_words`)."""
        if self.title:
            return self.title
        named = fallback_title(getattr(self, "opening_words", None) or "")
        return named or ("Temporary chat" if self.temporary else "New conversation")

    @property
    def expires_at(self):
        """When a temporary chat is deleted; None for one kept."""
        if not self.temporary or self.created_at is None:
            return None
        return self.created_at + TEMPORARY_LIFETIME


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"
        SYSTEM = "system", "System"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        STREAMING = "streaming", "Streaming"
        COMPLETE = "complete", "Complete"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    class FinishReason(models.TextChoices):
        STOP = "stop", "Stop"
        # Reached the answer's token cap; the user may have it continued.
        LENGTH = "length", "Length"
        # Cut by Thalamus: the model was repeating a block (apps.cognition.runaway).
        LOOP = "loop", "Loop"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    model = models.CharField(max_length=200, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True, help_text="Time to first token.")
    latency_ms = models.FloatField(null=True, blank=True, help_text="Total time of the reply.")
    error = models.TextField(blank=True)
    # The send statement inserts rows with raw SQL, hence the database default too.
    finish_reason = models.CharField(
        max_length=16, choices=FinishReason.choices, blank=True, default="", db_default=""
    )
    trace = models.JSONField(default=dict, blank=True)
    reply_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replies"
    )
    # Branches: a conversation is a tree. `parent` is the message this one follows (None for
    # the first); an edited question or a regenerated answer is a sibling of the one it
    # replaces. `active` marks the branch shown, whose messages in created_at order are the
    # history the model answers.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    active = models.BooleanField(default=True, db_default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    search = models.GeneratedField(
        expression=models.Func(
            models.Value("simple"),
            Coalesce("content", models.Value("")),
            function="to_tsvector",
            output_field=SearchVectorField(),
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="msg_conv_time"),
            # /v1 finds the conversation a client's history continues by its last question.
            models.Index(MD5("content"), name="msg_content_md5"),
            GinIndex(fields=["search"], name="msg_search"),
            models.Index(
                fields=["conversation", "-id"],
                name="msg_conv_active",
                condition=models.Q(active=True),
            ),
        ]
        constraints = [
            # One reply is generated at a time in a conversation; message_send and message_retry
            # refuse a second, and this settles two that race.
            models.UniqueConstraint(
                fields=["conversation"],
                condition=models.Q(role="assistant", status__in=["pending", "streaming"]),
                name="chat_one_open_reply",
            )
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:50]}"

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATUSES

    @property
    def can_continue(self) -> bool:
        """An answer cut short that the model can write on from: one stopped at its cap or in a
        loop, or a failed or stopped one (a continuation that broke off) with text to keep."""
        if self.role != Message.Role.ASSISTANT or not self.content.strip():
            return False
        if self.status == Message.Status.COMPLETE:
            return self.finish_reason in {self.FinishReason.LENGTH, self.FinishReason.LOOP}
        return self.status in {Message.Status.FAILED, Message.Status.CANCELLED}


# A reply still being generated (as chat_one_open_reply and the send statement spell them).
OPEN_STATUSES = [Message.Status.PENDING.value, Message.Status.STREAMING.value]
