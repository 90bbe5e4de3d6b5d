"""Episodic memory: a stretch of conversation summarised once it goes idle or grows long.

A stretch is the complete messages after the last one an episode of the conversation holds;
the episode is written under a lock on the conversation after re-checking that stretch, so a
repeated or concurrent run writes it once. A stretch too long for the model's window is
summarised in parts, one episode each. A stretch whose summary fails every attempt, or fails in
a way no attempt can mend (see tasks.summarise_episode), is marked (EpisodeFailure): neither
the sweep nor the turns ask for it again until the conversation has moved on.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import Count, F, Max, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from apps.accounts.selectors import memory_enabled_for
from apps.chat.models import Conversation, Message
from apps.cognition.reflection import as_shown, error_record
from apps.cognition.schemas import EpisodeSummary
from apps.core.llm.fitting import bodies, template_prompt
from apps.core.llm.outcomes import TooLong
from apps.core.llm.structured import complete_as
from apps.core.models import Event
from apps.core.selectors import runtime_config
from apps.core.services import event_record
from apps.memory import episode_services
from apps.memory.models import Episode, EpisodeFailure
from apps.memory.provenance import conversation_marker, marker_system

# One exchange (a question and its answer) is the smallest stretch worth an episode.
MIN_STRETCH = 2


def _covered_up_to(conversation_id: int) -> int:
    last = Message.objects.filter(
        conversation_id=conversation_id, episodes__isnull=False
    ).aggregate(last=Max("id"))["last"]
    return last or 0


def _settled_up_to(conversation_id: int) -> int:
    """The last message an episode holds or a failed summary gave up on."""
    failed = (
        EpisodeFailure.objects.filter(conversation_id=conversation_id)
        .values_list("through_message_id", flat=True)
        .first()
    )
    return max(_covered_up_to(conversation_id), failed or 0)


def _stretch(conversation_id: int, after: int, up_to: int | None = None) -> list[Message]:
    # The branch shown: an edited message's old text and a replaced answer are not the story.
    messages = Message.objects.filter(
        conversation_id=conversation_id, status=Message.Status.COMPLETE, id__gt=after, active=True
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
        id__gt=_settled_up_to(conversation_id),
        active=True,
    ).count()
    return pending >= config.short_term_window


def idle_conversations(*, idle_minutes: int, limit: int) -> list[int]:
    """Conversations idle for `idle_minutes` with a stretch no episode holds and no failed
    summary gave up on."""
    covered = (
        Message.objects.filter(conversation=OuterRef("pk"), episodes__isnull=False)
        .order_by("-id")
        .values("id")[:1]
    )
    failed = EpisodeFailure.objects.filter(conversation=OuterRef("pk")).values("through_message_id")
    cutoff = timezone.now() - timedelta(minutes=idle_minutes)
    return list(
        Conversation.objects.filter(updated_at__lt=cutoff)
        # A temporary chat, or one of a user with memory off, teaches the memory nothing.
        .exclude(temporary=True)
        .exclude(owner__thalamus_settings__memory_enabled=False)
        .annotate(covered=Greatest(Coalesce(Subquery(covered), 0), Coalesce(Subquery(failed), 0)))
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
    """Summarise the conversation's stretch no episode holds yet; None if there is none (or
    another run wrote it). An unusable reply raises InvalidReply, an LLM error its own
    exception: the task retries or gives up (`episode_give_up`)."""
    conversation = Conversation.objects.select_related("owner").filter(pk=conversation_id).first()
    if conversation is None:
        return None
    if conversation.temporary or not memory_enabled_for(user_id=conversation.owner_id):
        return None
    covered = _covered_up_to(conversation_id)
    stretch = _stretch(conversation_id, covered)
    if len(stretch) < MIN_STRETCH:
        return None
    summary, stretch = _first_part_summarised(stretch, conversation_marker(conversation_id))
    with transaction.atomic():
        Conversation.objects.select_for_update().filter(pk=conversation_id).first()
        if _covered_up_to(conversation_id) != covered:
            return None
        episode = episode_services.episode_create(
            owner=conversation.owner,
            conversation=conversation,
            summary=summary.summary,
            decisions=summary.decisions,
            outcome=summary.outcome,
            lesson=summary.lesson,
            messages=stretch,
            started_at=stretch[0].created_at,
            ended_at=stretch[-1].created_at,
            # Not under the conversation's lock: a task embeds it once this commits.
            embed=False,
        )
        event_record(
            kind=Event.Kind.EPISODE,
            summary=f"Remembered what happened in a conversation: {episode.summary[:200]}",
            owner=conversation.owner,
            payload={
                "episode_id": episode.pk,
                "conversation_id": conversation_id,
                "messages": len(stretch),
            },
        )
    return episode


def _first_part_summarised(
    stretch: list[Message], marker: str
) -> tuple[EpisodeSummary, list[Message]]:
    """The summary of the stretch, or of its first half, quarter… when the stretch does not fit
    the episode model's window (an imported chat of hundreds of messages): each part becomes an
    episode of its own, and the rest is the next stretch. TooLong only when two messages do
    not fit. Messages imported from another assistant are shown datamarked with `marker`."""
    part = stretch
    while True:
        # Every message of the part stays in the transcript; long ones lose their middle.
        lines = [f"{m.role}: {as_shown(m, marker)}" for m in part]
        prompt = template_prompt(
            "episode", slots={"transcript": bodies(lines)}, system=marker_system(marker, lines)
        )
        try:
            return complete_as(EpisodeSummary, role="episode", prompt=prompt), part
        except TooLong:
            half = len(part) // 2
            # A part ends with an answer, not with the question it answers.
            if half > MIN_STRETCH and part[half - 1].role == Message.Role.USER:
                half -= 1
            if half < MIN_STRETCH:
                raise
            part = part[:half]


def episode_give_up(*, conversation_id: int, attempts: int, error: str) -> None:
    """The last attempt at the conversation's stretch failed: mark the stretch and say why."""
    conversation = Conversation.objects.select_related("owner").filter(pk=conversation_id).first()
    if conversation is None:
        return
    stretch = _stretch(conversation_id, _covered_up_to(conversation_id))
    if not stretch:
        return
    with transaction.atomic():
        episode_services.episode_failure_record(
            conversation=conversation,
            through_message_id=stretch[-1].pk,
            attempts=attempts,
            error=error,
        )
        error_record(
            owner=conversation.owner,
            step="episode",
            message_id=None,
            error=f"gave up after {attempts} attempts: {error}",
        )
