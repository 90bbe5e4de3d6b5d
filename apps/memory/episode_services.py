"""Episodes written: a stretch of conversation's summary, its instruction-like sentences held
for approval, and the stretches no summary could be made of."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.language.text import sentences, visible
from apps.memory.embedding_services import embedding_try, embeddings_fill_later
from apps.memory.models import EmbeddingStatus, Episode, EpisodeFailure, MemoryNode
from apps.memory.quarantine import looks_like_instruction
from apps.memory.services import memory_hold


def episode_create(
    *,
    owner: AbstractBaseUser,
    summary: str,
    conversation: Conversation | None = None,
    decisions: str = "",
    outcome: str = "",
    lesson: str = "",
    messages: list[Message] | None = None,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    embed: bool = True,
    source: str = MemoryNode.Source.INFERRED,
) -> Episode:
    """Store an episode. Its sentences that read as instructions are held (`memory_hold`)
    instead: recalled episodes reach the answer's prompt."""
    now = timezone.now()
    texts = {"summary": summary, "decisions": decisions, "outcome": outcome, "lesson": lesson}
    texts = {name: visible(text) for name, text in texts.items()}
    kept = {name: _held_sentences_out(owner, text, source=source) for name, text in texts.items()}
    episode = Episode(
        owner=owner,
        conversation=conversation,
        summary=kept["summary"].strip() or HELD_SUMMARY,
        decisions=kept["decisions"],
        outcome=kept["outcome"],
        lesson=kept["lesson"],
        started_at=started_at or now,
        ended_at=ended_at or now,
    )
    vector, marker = embedding_try(text=episode.embedding_text) if embed else (None, "")
    if vector is not None:
        episode.embedding = vector
        episode.embedding_model = marker
        episode.embedding_status = EmbeddingStatus.READY
    with transaction.atomic():
        episode.save()
        if messages:
            episode.messages.set(messages)
        if vector is None:
            embeddings_fill_later()
    return episode


HELD_SUMMARY = "(This episode's summary is held for the user's approval.)"


def _held_sentences_out(owner: AbstractBaseUser, text: str, *, source: str) -> str:
    """`text` without its instruction-like sentences, each held for approval."""
    if not looks_like_instruction(text):
        return text
    kept = []
    for sentence in sentences(text):
        if looks_like_instruction(sentence):
            memory_hold(owner=owner, text=sentence, held_from="episode summary", source=source)
        else:
            kept.append(sentence)
    rest = " ".join(kept)
    if looks_like_instruction(rest):
        memory_hold(owner=owner, text=rest, held_from="episode summary", source=source)
        return ""
    return rest


def episode_failure_record(
    *, conversation: Conversation, through_message_id: int, attempts: int, error: str
) -> EpisodeFailure:
    """Mark the stretch up to `through_message_id` as one no summary could be made of."""
    failure, _ = EpisodeFailure.objects.update_or_create(
        conversation=conversation,
        defaults={
            "through_message_id": through_message_id,
            "attempts": attempts,
            "error": error[:2000],
            "failed_at": timezone.now(),
        },
    )
    return failure
