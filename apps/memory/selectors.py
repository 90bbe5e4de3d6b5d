"""Reads of memory for the turn, the pages and the tools: current memories, what was believed
at a moment, the knowledge graph, the world state and the conversation's retrieval plan. The
hybrid search is in `search_selectors`."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Q, QuerySet
from pydantic import ValidationError

from apps.chat.models import Conversation
from apps.core.db import RowModel, fetch_hot, json_value
from apps.memory.models import (
    GLOBAL_COUNT_KEY,
    MemoryNode,
    Predicate,
    RetrievalPlan,
    Triple,
    WorldState,
)
from apps.memory.provenance import BEHAVIOUR_SOURCES
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


_WORLD = RowModel(WorldState)
# Read before every answer: one bound statement, where the ORM's query cost about 1 ms of the web
# process's CPU to build.
_WORLD_SQL = f"""
SELECT {_WORLD.columns("w")} FROM {WorldState._meta.db_table} w WHERE w.owner_id = %(owner)s
"""


def world_state_for(*, user_id: int) -> WorldState:
    """The user's world state; an unsaved, empty one when nothing has set it yet."""
    rows = fetch_hot(_WORLD_SQL, {"owner": user_id}, prepare=True)
    return _WORLD.load(rows[0]) if rows else WorldState(owner_id=user_id)


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


# The conversation's plan, the owner's and the global knowledge versions, and the user's graph
# (their triples, then the global ones, in the renderer's order) in one round trip: the turn
# needs both before it can search. The graph is read only when a version differs from the one
# the process last read it at; while both stand, the CASE's subquery is not executed. The order is
# found in triple_owner_known, without the table; only the triples shown are read from it.
_PLAN_AND_KNOWLEDGE_SQL = """
SELECT (SELECT steps FROM memory_retrievalplan WHERE conversation_id = %(conversation)s),
       versions.own, versions.global,
       CASE WHEN versions.own IS NOT DISTINCT FROM %(own)s::bigint
             AND versions.global IS NOT DISTINCT FROM %(global)s::bigint
            THEN NULL
            ELSE (SELECT COALESCE(json_agg(json_build_array(t.id, t.owner_id, t.subject,
                                                            t.predicate_id, t.object, t.category,
                                                            t.confidence, known.name,
                                                            known.labels)
                                           ORDER BY known.owner_id, known.category, known.name,
                                                    known.confidence DESC, known.id),
                                  '[]'::json)
                    FROM (SELECT current.id, current.owner_id, current.category,
                                 current.confidence, p.name, p.labels
                            FROM (SELECT id, owner_id, category, confidence, predicate_id
                                    FROM memory_triple
                                   WHERE owner_id = %(owner)s::int AND valid_to IS NULL
                                  UNION ALL
                                  SELECT id, owner_id, category, confidence, predicate_id
                                    FROM memory_triple
                                   WHERE owner_id IS NULL AND valid_to IS NULL) AS current
                            JOIN memory_predicate AS p ON p.id = current.predicate_id
                           ORDER BY current.owner_id, current.category, p.name,
                                    current.confidence DESC, current.id
                           LIMIT %(limit)s) AS known
                    JOIN memory_triple AS t ON t.id = known.id)
       END
  FROM (SELECT (SELECT version FROM memory_knowledgeversion WHERE owner_key = %(owner)s::int)
                   AS own,
               (SELECT version FROM memory_knowledgeversion WHERE owner_key = %(global_key)s)
                   AS global) AS versions
"""
# No version is ever negative: a process that has not read an owner's graph asks with these.
_NO_VERSION = -1


_TRIPLE_FIELDS = ("id", "owner_id", "subject", "predicate_id", "object", "category", "confidence")
_PREDICATE_FIELDS = ("id", "name", "labels")


class _KnownGraphs:
    """The graphs this process last read, by database, owner and limit, with their versions.

    At most `size` of them, the least recently used dropped first: a graph of 200 triples
    takes ~113 KB, so 256 of them at most ~29 MB a process. The triples are shared by the
    turns that read them, which only read them.
    """

    def __init__(self, size: int):
        self.size = size
        self._graphs: OrderedDict[tuple, tuple[int | None, int | None, list[Triple]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, key: tuple) -> tuple[int | None, int | None, list[Triple]] | None:
        with self._lock:
            known = self._graphs.get(key)
            if known is not None:
                self._graphs.move_to_end(key)
            return known

    def put(self, key: tuple, known: tuple[int | None, int | None, list[Triple]]) -> None:
        with self._lock:
            self._graphs[key] = known
            self._graphs.move_to_end(key)
            while len(self._graphs) > self.size:
                self._graphs.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._graphs.clear()


_KNOWN_GRAPHS = _KnownGraphs(size=256)


def forget_known_graphs() -> None:
    """Drop the graphs this process keeps: the next turn of every user reads theirs whole."""
    _KNOWN_GRAPHS.clear()


def plan_and_knowledge(
    *, user_id: int, conversation_id: int | None, limit: int = 200
) -> tuple[object, list[Triple]]:
    """The stored plan steps (None without a plan) and the triples the renderer shows.

    The triples come from this process's last read of the user's graph when neither their nor
    the global knowledge version has moved since (`KnowledgeVersion`); they are shared, so a
    caller must not change them.
    """
    key = (connection.settings_dict["NAME"], int(user_id), limit)
    known = _KNOWN_GRAPHS.get(key)
    own, global_, _ = known or (_NO_VERSION, _NO_VERSION, None)
    ((steps, own_now, global_now, rows),) = fetch_hot(
        _PLAN_AND_KNOWLEDGE_SQL,
        {
            "conversation": conversation_id,
            "owner": int(user_id),
            "global_key": GLOBAL_COUNT_KEY,
            "limit": limit,
            "own": own,
            "global": global_,
        },
        prepare=True,
    )
    steps = json_value(steps)
    if rows is None and known is not None:
        return steps, list(known[2])
    triples = _triples(json_value(rows))
    _KNOWN_GRAPHS.put(key, (own_now, global_now, triples))
    return steps, list(triples)


def _triples(rows: list[list]) -> list[Triple]:
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
    return triples


def rules_and_preferences_for(*, user_id: int, limit: int = 50) -> QuerySet[MemoryNode]:
    """The user's current rules and preferences, and the global ones: rules first, then the
    most important; what the internal debate holds an answer's draft to. Only those of a
    behaviour-capable source (apps.memory.provenance): a file, another agent or the model
    never sets a rule."""
    return (
        MemoryNode.objects.filter(
            Q(owner_id=user_id) | Q(owner=None),
            kind__in=[MemoryNode.Kind.RULE, MemoryNode.Kind.PREFERENCE],
            source__in=BEHAVIOUR_SOURCES,
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
