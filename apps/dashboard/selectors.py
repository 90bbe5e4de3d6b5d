"""Reads behind the live dashboard: whose mind a viewer may watch, its counters, events, graph."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from apps.chat.models import Message
from apps.cognition.reflection import TRACE_KEY
from apps.core.models import Event
from apps.core.selectors import runtime_config
from apps.core.services import mind_group
from apps.language.facts.address import addressed
from apps.memory.models import Critique, Episode, MemoryLink, MemoryNode, Triple

# Each kind of event as the mind stream names it to the user, in plain words.
KIND_WORDS = {
    Event.Kind.PERCEPTION: "Learning",
    Event.Kind.CRITIQUE: "Checking",
    Event.Kind.DEBATE: "Reviewing an answer",
    Event.Kind.PROMOTION: "Long-term memory",
    Event.Kind.LINK: "Connections",
    Event.Kind.DECAY: "Forgetting",
    Event.Kind.EPISODE: "Conversations",
    Event.Kind.EDIT: "Changes",
    Event.Kind.TURN: "Answers",
    Event.Kind.ERROR: "Problem",
    Event.Kind.WARNING: "Warning",
}

GRAPH_LIMIT = 2000
GRAPH_LIMIT_MAX = 32000
STREAM_LIMIT = 100
# A turn younger than this with no reflection outcome yet is still being reflected on (its
# retries back off for minutes); older, it counts as a turn whose memories were not written.
REFLECTION_IN_FLIGHT = timedelta(minutes=10)


@dataclass(frozen=True)
class MindScope:
    """Whose mind a dashboard shows: one user's (owner_id) or global knowledge (None)."""

    owner_id: int | None
    label: str
    who: str  # "me", "global" or a user id, as in the page and websocket URLs

    @property
    def group(self) -> str:
        return mind_group(self.owner_id)

    def owned(self, queryset: QuerySet) -> QuerySet:
        if self.owner_id is None:
            return queryset.filter(owner__isnull=True)
        return queryset.filter(owner_id=self.owner_id)


def mind_scope_for(*, user, who: str) -> MindScope | None:
    """The scope `who` names if `user` may watch it, else None (callers answer 404).

    Everyone may watch their own mind; staff may also watch any user's and global knowledge.
    """
    if not user.is_authenticated:
        return None
    if who == "me" or who == str(user.pk):
        return MindScope(owner_id=user.pk, label=user.get_username(), who="me")
    if not user.is_staff:
        return None
    if who == "global":
        return MindScope(owner_id=None, label="Global knowledge", who="global")
    if who.isdigit():
        other = get_user_model().objects.filter(pk=int(who)).first()
        if other is not None:
            return MindScope(owner_id=other.pk, label=other.get_username(), who=str(other.pk))
    return None


def mind_counters(*, scope: MindScope) -> dict[str, int]:
    current = scope.owned(MemoryNode.objects.filter(valid_to=None))
    links = MemoryLink.objects.filter(source__in=scope.owned(MemoryNode.objects.all()).values("pk"))
    return {
        "volatile": current.filter(state=MemoryNode.State.VOLATILE).count(),
        "promoted": current.filter(state=MemoryNode.State.PROMOTED).count(),
        "episodes": scope.owned(Episode.objects.all()).count(),
        "triples": scope.owned(Triple.objects.filter(valid_to=None)).count(),
        "links": links.count(),
    }


@dataclass(frozen=True)
class WriteRate:
    """Of the `turns` in a window in which the user stated something about themselves, how
    many taught the memory something."""

    turns: int
    written: int

    @property
    def percent(self) -> int | None:
        return round(100 * self.written / self.turns) if self.turns else None


def memory_write_rates(*, owner_id: int | None) -> dict[str, WriteRate] | None:
    """The memory write success rate over the last hour and day, for one user or (None) all.

    A turn counts when its user message stated something about the user: reflection records
    `stated` (the model quoted a statement of theirs, or the rules saw one, even when the
    reflection failed). It is written when it taught a memory: a new, updated or restated one
    (`taught`). A complete reply that no reflection reached in time counts as a turn not
    written, unless nothing could be learnt from it (a temporary chat, memory off for it).
    None while reflection is switched off: no turn is then expected to write anything.
    """
    if not runtime_config().reflection_enabled:
        return None
    now = timezone.now()
    replies = Message.objects.filter(
        role=Message.Role.ASSISTANT,
        status=Message.Status.COMPLETE,
        created_at__gte=now - timedelta(days=1),
    )
    if owner_id is not None:
        replies = replies.filter(conversation__owner_id=owner_id)
    stated = Q(**{f"trace__{TRACE_KEY}__stated": True})
    lost = (
        ~Q(trace__has_key=TRACE_KEY)
        & Q(created_at__lt=now - REFLECTION_IN_FLIGHT, conversation__temporary=False)
        & ~Q(trace__contains={"memory": {"off": True}})
    )
    turns = stated | lost
    written = stated & Q(**{f"trace__{TRACE_KEY}__taught": True})
    last_hour = Q(created_at__gte=now - timedelta(hours=1))
    counts = replies.aggregate(
        hour_turns=Count("pk", filter=turns & last_hour),
        hour_written=Count("pk", filter=written & last_hour),
        day_turns=Count("pk", filter=turns),
        day_written=Count("pk", filter=written),
    )
    return {
        "hour": WriteRate(turns=counts["hour_turns"], written=counts["hour_written"]),
        "day": WriteRate(turns=counts["day_turns"], written=counts["day_written"]),
    }


def mind_events(*, scope: MindScope, after_id: int = 0, limit: int = STREAM_LIMIT) -> list[Event]:
    """The newest events of the scope (newest first), only those after `after_id` if given."""
    events = scope.owned(Event.objects.all())
    if after_id:
        events = events.filter(pk__gt=after_id)
    events = list(events.order_by("-id")[:limit])
    # A critique event names its Critique; the debate itself is the "full text" to show.
    critique_ids = [e.payload.get("critique_id") for e in events if e.payload.get("critique_id")]
    debates = dict(Critique.objects.filter(pk__in=critique_ids).values_list("pk", "debate"))
    for event in events:
        event.debate = debates.get(event.payload.get("critique_id"), "")
    return events


def _opacity(node: dict, now, decay_seconds: float, minimum_score: int) -> float:
    """Volatile nodes the decay pass would delete fade as their last access ages."""
    if node["state"] != MemoryNode.State.VOLATILE or node["confidence_score"] >= minimum_score:
        return 1.0
    touched = node["last_accessed_at"] or node["created_at"]
    age = (now - touched).total_seconds() / decay_seconds
    return round(max(0.25, 1.0 - 0.75 * min(1.0, age)), 2)


def mind_graph(*, scope: MindScope, limit: int = GRAPH_LIMIT) -> dict:
    """Up to `limit` current memories of the scope (newest, and hubs) and links among them.

    Returned as plain data keyed by id, so a consumer can diff two snapshots cheaply.
    """
    config = runtime_config()
    now = timezone.now()
    decay_seconds = max(3600.0, config.decay_hours * 3600.0)
    current = scope.owned(MemoryNode.objects.filter(valid_to=None))
    fields = [
        "id",
        "description",
        "kind",
        "state",
        "confidence_score",
        "created_at",
        "last_accessed_at",
    ]
    rows = list(current.order_by("-created_at", "-id").values(*fields)[: limit + 1])
    truncated = len(rows) > limit
    rows = rows[:limit]
    if truncated:
        # Beyond the cap, a quarter of the places go to the hubs of the graph, so its
        # clusters stay visible however old they are; the newest memories fill the rest.
        hubs = list(
            current.annotate(
                degree=Count("links_out", distinct=True) + Count("links_in", distinct=True)
            )
            .filter(degree__gt=0)
            .order_by("-degree", "-id")
            .values(*fields)[: limit // 4]
        )
        hub_ids = {row["id"] for row in hubs}
        rows = hubs + [row for row in rows if row["id"] not in hub_ids][: limit - len(hubs)]
    nodes = {
        row["id"]: {
            "id": row["id"],
            # Said to its user on their own Mind ("You live in Ghent"); as stored to an admin.
            "label": _short(
                addressed(row["description"]) if scope.who == "me" else row["description"]
            ),
            "kind": row["kind"],
            "state": row["state"],
            "confidence": row["confidence_score"],
            "opacity": _opacity(row, now, decay_seconds, config.minimum_score),
        }
        for row in rows
    }
    ids = list(nodes)
    edges = {}
    if ids:
        for link in MemoryLink.objects.filter(source_id__in=ids, target_id__in=ids).values(
            "id", "source_id", "target_id", "kind", "score"
        ):
            edges[link["id"]] = {
                "id": link["id"],
                "from": link["source_id"],
                "to": link["target_id"],
                "kind": link["kind"],
                "score": round(link["score"], 3),
            }
    return {"nodes": nodes, "edges": edges, "truncated": truncated, "limit": limit}


def graph_delta(before: dict, after: dict) -> dict:
    """What a client showing `before` must change to show `after`."""
    return {
        "nodes": [node for pk, node in after["nodes"].items() if before["nodes"].get(pk) != node],
        "removed_nodes": [pk for pk in before["nodes"] if pk not in after["nodes"]],
        "edges": [edge for pk, edge in after["edges"].items() if before["edges"].get(pk) != edge],
        "removed_edges": [pk for pk in before["edges"] if pk not in after["edges"]],
        "truncated": after["truncated"],
        "limit": after["limit"],
    }


EMPTY_GRAPH = {"nodes": {}, "edges": {}, "truncated": False, "limit": GRAPH_LIMIT}


def _short(text: str, length: int = 48) -> str:
    text = " ".join(text.split())
    return text if len(text) <= length else text[: length - 1] + "…"


def node_for_viewer(*, user, pk: int) -> MemoryNode | None:
    """A node the viewer may inspect: their own, or any (and global ones) for staff."""
    nodes = MemoryNode.objects.select_related("owner", "source_message")
    if not user.is_staff:
        nodes = nodes.filter(owner=user)
    return nodes.filter(pk=pk).first()


def node_neighbours(*, node: MemoryNode) -> list[tuple[str, MemoryNode, float]]:
    links = MemoryLink.objects.filter(Q(source=node) | Q(target=node)).select_related(
        "source", "target"
    )[:50]
    return [
        (link.kind, link.target if link.source_id == node.pk else link.source, link.score)
        for link in links
    ]


def watchable_users(*, user) -> QuerySet:
    if not user.is_staff:
        return get_user_model().objects.none()
    return get_user_model().objects.order_by("username").only("id", "username")[:500]
