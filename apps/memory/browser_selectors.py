"""The memory browser's reads: one user's memories, knowledge and episodes, as its pages ask.

Every query is filtered by the owner; another user's row is simply not found.
"""

from __future__ import annotations

from datetime import date, datetime, time

from django.contrib.postgres.search import SearchQuery
from django.db.models import Q, QuerySet
from django.utils import timezone
from pgvector.django import CosineDistance

from apps.memory.models import Episode, MemoryNode, Triple, score_at_least, score_at_most
from apps.memory.selectors import memories_as_of


def memory_node_for_user(*, user, pk: int) -> MemoryNode | None:
    return MemoryNode.objects.filter(owner=user, pk=pk).select_related("source_message").first()


def memory_node_ids_for_user(*, user, ids: list[int]) -> list[int]:
    return list(MemoryNode.objects.filter(owner=user, pk__in=ids).values_list("pk", flat=True))


def memories_believed(*, user, as_of: date | None) -> QuerySet[MemoryNode]:
    """The current memories, or those believed at the end of the `as_of` day."""
    if as_of is None:
        return MemoryNode.objects.filter(owner=user, valid_to=None)
    at = timezone.make_aware(datetime.combine(as_of, time.max))
    return memories_as_of(user_id=user.pk, at=at)


def memories_for_browser(
    *, user, filters: dict | None, similar_to: list[float] | None = None
) -> QuerySet[MemoryNode]:
    """The browser's list: `filters` is its filter form's cleaned data (None when the form is
    not valid), `similar_to` the vector of the "similar to" text when it could be embedded.

    Memories awaiting approval have their own section, unless asked for by state.
    """
    as_of = filters.get("as_of") if filters else None
    nodes = memories_believed(user=user, as_of=as_of).select_related("source_message")
    if filters is None:
        return nodes.exclude(state=MemoryNode.State.QUARANTINED).order_by("-created_at", "-id")
    if filters["kind"]:
        nodes = nodes.filter(kind=filters["kind"])
    if filters["state"]:
        nodes = nodes.filter(state=filters["state"])
    else:
        nodes = nodes.exclude(state=MemoryNode.State.QUARANTINED)
    # The form's bounds are percents of confidence_share, which grows with the score: each is a
    # bound on the score (a score at or below 0 is 0%).
    low, high = filters["min_confidence"], filters["max_confidence"]
    if low is not None and low >= 100:
        nodes = nodes.none()
    elif low:
        nodes = nodes.filter(confidence_score__gte=score_at_least(low))
    if high is not None and high < 100:
        nodes = nodes.filter(confidence_score__lte=score_at_most(high))
    text = filters["q"].strip()
    if text:
        query = SearchQuery(filters["q"], config="simple", search_type="websearch")
        nodes = nodes.filter(Q(tsv=query) | Q(description__icontains=text))
    if similar_to is not None:
        return nodes.exclude(embedding=None).order_by(CosineDistance("embedding", similar_to))
    return nodes.order_by("-created_at", "-id")


def memories_awaiting_approval(*, user) -> QuerySet[MemoryNode]:
    return (
        MemoryNode.objects.filter(owner=user, state=MemoryNode.State.QUARANTINED, valid_to=None)
        .select_related("source_message")
        .order_by("-created_at", "-id")
    )


def memory_counts_for_user(*, user) -> dict[str, int]:
    return {
        "memories": MemoryNode.objects.filter(owner=user, valid_to=None).count(),
        "episodes": Episode.objects.filter(owner=user).count(),
        "triples": Triple.objects.filter(owner=user, valid_to=None).count(),
    }


def triples_for_user(*, user) -> QuerySet[Triple]:
    return (
        Triple.objects.filter(owner=user, valid_to=None)
        .select_related("predicate", "source_message")
        .order_by("category", "subject", "id")
    )


def episodes_for_user(*, user) -> QuerySet[Episode]:
    return Episode.objects.filter(owner=user).order_by("-ended_at", "-id")
