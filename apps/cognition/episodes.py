"""Episodic memory: a stretch of conversation summarised once it goes idle or grows long.

A stretch is the complete messages after the last one an episode of the conversation holds;
the episode is written under a lock on the conversation after re-checking that stretch, so a
repeated or concurrent run writes it once.
"""

from __future__ import annotations

from datetime import timedelta

import openai
from django.db import transaction
from django.db.models import Count, F, Max, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.cognition.budget import bodies, fill_to_fit
from apps.cognition.reflection import error_record
from apps.cognition.schemas import EpisodeSummary, InvalidReply
from apps.cognition.structured import complete_as
from apps.core.llm_limits import EPISODE
from apps.core.models import Event
from apps.core.selectors import runtime_config
from apps.core.services import event_record
from apps.memory import services as memory_services
from apps.memory.models import Episode

# One exchange (a question and its answer) is the smallest stretch worth an episode.
MIN_STRETCH = 2


def _covered_up_to(conversation_id: int) -> int:
    last = Message.objects.filter(
        conversation_id=conversation_id, episodes__isnull=False
    ).aggregate(last=Max("id"))["last"]
    return last or 0


def _stretch(conversation_id: int, after: int, up_to: int | None = None) -> list[Message]:
    messages = Message.objects.filter(
        conversation_id=conversation_id, status=Message.Status.COMPLETE, id__gt=after
    )
    if up_to is not None:
        messages = messages.filter(id__lte=up_to)
    return list(messages.order_by("id"))


def due_after_turn(*, conversation_id: int) -> bool:
    """Every N turns: N is the short-term window, the messages the prompt can still see."""
    config = runtime_config()
    pending = Message.objects.filter(
        conversation_id=conversation_id,
        status=Message.Status.COMPLETE,
        id__gt=_covered_up_to(conversation_id),
    ).count()
    return pending >= config.short_term_window


def idle_conversations(*, idle_minutes: int, limit: int) -> list[int]:
    """Conversations idle for `idle_minutes` with a stretch no episode holds yet."""
    covered = (
        Message.objects.filter(conversation=OuterRef("pk"), episodes__isnull=False)
        .order_by("-id")
        .values("id")[:1]
    )
    cutoff = timezone.now() - timedelta(minutes=idle_minutes)
    return list(
        Conversation.objects.filter(updated_at__lt=cutoff)
        .annotate(covered=Coalesce(Subquery(covered), 0))
        .annotate(
            pending=Count(
                "messages",
                filter=Q(messages__status=Message.Status.COMPLETE)
                & Q(messages__id__gt=F("covered")),
            )
        )
        .filter(pending__gte=MIN_STRETCH)
        .order_by("updated_at")
        .values_list("pk", flat=True)[:limit]
    )


def episode_summarise(*, conversation_id: int) -> Episode | None:
    conversation = Conversation.objects.select_related("owner").filter(pk=conversation_id).first()
    if conversation is None:
        return None
    covered = _covered_up_to(conversation_id)
    stretch = _stretch(conversation_id, covered)
    if len(stretch) < MIN_STRETCH:
        return None
    # Every message of the stretch stays in the transcript; long ones lose their middle.
    prompt = fill_to_fit(
        "episode",
        role=EPISODE,
        slots={"transcript": bodies([f"{m.role}: {m.content}" for m in stretch])},
    )
    try:
        summary = complete_as(
            EpisodeSummary, role="episode", messages=[{"role": "user", "content": prompt}]
        )
    except (InvalidReply, openai.BadRequestError, openai.APIResponseValidationError) as exc:
        error_record(owner=conversation.owner, step="episode", message_id=None, error=str(exc))
        return None
    with transaction.atomic():
        Conversation.objects.select_for_update().filter(pk=conversation_id).first()
        if _covered_up_to(conversation_id) != covered:
            return None
        episode = memory_services.episode_create(
            owner=conversation.owner,
            conversation=conversation,
            summary=summary.summary,
            decisions=summary.decisions,
            outcome=summary.outcome,
            lesson=summary.lesson,
            messages=stretch,
            started_at=stretch[0].created_at,
            ended_at=stretch[-1].created_at,
        )
        event_record(
            kind=Event.Kind.EPISODE,
            summary=f"remembered an episode: {episode.summary[:200]}",
            owner=conversation.owner,
            payload={
                "episode_id": episode.pk,
                "conversation_id": conversation_id,
                "messages": len(stretch),
            },
        )
    return episode
