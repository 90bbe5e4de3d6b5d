"""Reads of memory for the turn, the pages and the tools: current memories, what was believed
at a moment, the knowledge graph, the world state and the conversation's retrieval plan. The
hybrid search is in `search_selectors`."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Q, QuerySet
from pydantic import ValidationError

from apps.chat.models import Conversation
from apps.core.db import fetch_hot, json_value
from apps.memory.models import MemoryNode, Predicate, RetrievalPlan, Triple, WorldState
from apps.memory.schemas import PlanStep, RetrievalPlanSchema

logger = logging.getLogger(__name__)


def current_memories_for(*, user_id: int) -> QuerySet[MemoryNode]:
    return MemoryNode.objects.filter(Q(owner_id=user_id) | Q(owner=None), valid_to=None).order_by(
        "-created_at"
    )


def shared_memory_count() -> int:
    """How many current global memories (every user's, owned by none) there are."""
    return MemoryNode.objects.filter(owner=None, valid_to=None).count()


def memories_as_of(*, user_id: int, at: datetime) -> QuerySet[MemoryNode]:
    """What was believed about a user at a moment: each value that had begun by then and
    was neither superseded nor past its own end yet (superseded rows hold the old values)."""
    return MemoryNode.objects.filter(
        Q(valid_to=None) | Q(valid_to__gt=at),
        Q(valid_until=None) | Q(valid_until__gt=at),
        owner_id=user_id,
        created_at__lte=at,
        valid_from__lte=at,
    )


def knowledge_triples_for(*, user_id: int, limit: int = 200) -> QuerySet[Triple]:
    """The user's current triples and the global ones, in the renderer's order."""
    return (
        Triple.objects.filter(Q(owner_id=user_id) | Q(owner=None), valid_to=None)
        .select_related("predicate")
        .order_by("owner_id", "category", "predicate__name", "-confidence", "id")[:limit]
    )


def world_state_for(*, user_id: int) -> WorldState:
    """The user's world state; an unsaved, empty one when nothing has set it yet."""
    return WorldState.objects.filter(owner_id=user_id).first() or WorldState(owner_id=user_id)


def default_plan_steps(text: str, limit: int) -> list[PlanStep]:
    return [PlanStep(query=text[:1000], limit=limit)]


def retrieval_plan_steps(
    *, conversation: Conversation | None, text: str, limit: int
) -> tuple[list[PlanStep], str]:
    """The steps to run this turn and where they came from: plan, default or corrupt-plan.

    The user's own message is always searched too: the plan was made before it was written.
    """
    stored = None
    if conversation is not None:
        stored = RetrievalPlan.objects.filter(conversation=conversation).values("steps").first()
    return turn_plan_steps(
        stored["steps"] if stored else None,
        text=text,
        limit=limit,
        conversation_id=conversation.pk if conversation else None,
    )


def turn_plan_steps(
    stored_steps, *, text: str, limit: int, conversation_id: int | None
) -> tuple[list[PlanStep], str]:
    default = default_plan_steps(text, limit)
    if stored_steps is None:
        return default, "default"
    try:
        plan = RetrievalPlanSchema.model_validate({"steps": stored_steps})
    except ValidationError:
        logger.warning("corrupt retrieval plan of conversation %s ignored", conversation_id)
        return default, "corrupt-plan"
    if not plan.steps:
        return default, "default"
    return [*default, *plan.steps], "plan"


# The conversation's plan and the user's graph (their triples, then the global ones, in the
# renderer's order) in one round trip: the turn needs both before it can search. The order is
# found in triple_owner_known, without the table; only the triples shown are read from it.
_PLAN_AND_KNOWLEDGE_SQL = """
SELECT (SELECT steps FROM memory_retrievalplan WHERE conversation_id = %(conversation)s),
       (SELECT COALESCE(json_agg(json_build_array(t.id, t.owner_id, t.subject, t.predicate_id,
                                                  t.object, t.category, t.confidence,
                                                  known.name, known.labels)
                                 ORDER BY known.owner_id, known.category, known.name,
                                          known.confidence DESC, known.id),
                        '[]'::json)
          FROM (SELECT current.id, current.owner_id, current.category, current.confidence,
                       p.name, p.labels
                  FROM (SELECT id, owner_id, category, confidence, predicate_id
                          FROM memory_triple
                         WHERE owner_id = %(owner)s::int AND valid_to IS NULL
                        UNION ALL
                        SELECT id, owner_id, category, confidence, predicate_id
                          FROM memory_triple
                         WHERE owner_id IS NULL AND valid_to IS NULL) AS current
                  JOIN memory_predicate AS p ON p.id = current.predicate_id
                 ORDER BY current.owner_id, current.category, p.name, current.confidence DESC,
                          current.id
                 LIMIT %(limit)s) AS known
          JOIN memory_triple AS t ON t.id = known.id)
"""


_TRIPLE_FIELDS = ("id", "owner_id", "subject", "predicate_id", "object", "category", "confidence")
_PREDICATE_FIELDS = ("id", "name", "labels")


def plan_and_knowledge(
    *, user_id: int, conversation_id: int | None, limit: int = 200
) -> tuple[object, list[Triple]]:
    """The stored plan steps (None without a plan) and the triples the renderer shows."""
    ((steps, rows),) = fetch_hot(
        _PLAN_AND_KNOWLEDGE_SQL,
        {"conversation": conversation_id, "owner": int(user_id), "limit": limit},
    )
    steps, rows = json_value(steps), json_value(rows)
    # Built as a queryset builds its rows (from_db: the fields read, the rest deferred), with one
    # instance per predicate: keyword construction of 200 triples and their predicates held the
    # GIL for ~3 ms of every turn (bench/README.md, Retrieval).
    predicates: dict[int, Predicate] = {}
    triples = []
    for row in rows:
        predicate = predicates.get(row[3])
        if predicate is None:
            predicate = predicates[row[3]] = Predicate.from_db(
                DEFAULT_DB_ALIAS, _PREDICATE_FIELDS, (row[3], row[7], row[8] or {})
            )
        triple = Triple.from_db(DEFAULT_DB_ALIAS, _TRIPLE_FIELDS, row[:7])
        triple.predicate = predicate
        triples.append(triple)
    return steps, triples


def rules_and_preferences_for(*, user_id: int, limit: int = 50) -> QuerySet[MemoryNode]:
    """The user's current rules and preferences, and the global ones: rules first, then the
    most important; what the internal debate holds an answer's draft to."""
    return (
        MemoryNode.objects.filter(
            Q(owner_id=user_id) | Q(owner=None),
            kind__in=[MemoryNode.Kind.RULE, MemoryNode.Kind.PREFERENCE],
            valid_to=None,
        )
        .exclude(state=MemoryNode.State.QUARANTINED)
        .order_by("-kind", "-importance", "-created_at")[:limit]  # "rule" sorts after "preference"
    )


_CURRENT_IDS_SQL = """
SELECT 'memory', id FROM memory_memorynode
 WHERE id = ANY(%(memories)s::bigint[]) AND valid_to IS NULL AND state <> 'quarantined'
UNION ALL
SELECT 'triple', id FROM memory_triple WHERE id = ANY(%(triples)s::bigint[]) AND valid_to IS NULL
UNION ALL
SELECT 'episode', id FROM memory_episode WHERE id = ANY(%(episodes)s::bigint[])
"""


def current_ids(
    *, memories: set[int], triples: set[int], episodes: set[int]
) -> tuple[set[int], set[int], set[int]]:
    """Of these ids, the memories and facts still current (a memory not held for approval
    either), and the episodes still there; one statement."""
    found: dict[str, set[int]] = {"memory": set(), "triple": set(), "episode": set()}
    if memories or triples or episodes:
        params = {
            "memories": sorted(memories),
            "triples": sorted(triples),
            "episodes": sorted(episodes),
        }
        for kind, pk in fetch_hot(_CURRENT_IDS_SQL, params):
            found[kind].add(pk)
    return found["memory"], found["triple"], found["episode"]
