"""Forgetting: a person's memories on request (some, or all of them), and CLAM's decay.

Forget means forget: what is forgotten leaves no row holding its text. Memory deletes its own
rows in one statement; the events that quote them are core's to delete and the answers' traces
that list them chat's to rewrite, each in one statement of theirs, in the same transaction.

What may paraphrase a memory rather than quote it (a retrieval plan's queries, the internal
debate's draft and review) cannot be told apart, so a person's forgetting takes all of theirs;
decay, which runs every hour and forgets what nobody used, takes only what quotes it whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import connection, transaction

from apps.chat.trace_forgetting import message_traces_forget, message_traces_forget_all_memories
from apps.core.models import Event
from apps.core.services import events_delete_mentioning, events_delete_of_owner, events_record
from apps.memory.models import Episode, MemoryNode, RetrievalPlan, Triple, WorldState


# The words of a text, for `_RESTATES`: lower case, split at whatever is not a letter or digit.
def _words(text: str) -> str:
    return f"array_remove(regexp_split_to_array(lower({text}), '[^[:alnum:]]+'), '')"


# A triple `t` restates the memory `f` when the same turn taught both (reflection writes a
# statement's memory and its triple with the same source message) and every word of the
# triple's object is in the memory's text or the user's words it comes from ("user has_name
# Laura" restates "The user's name is Laura"). Not every triple of the turn: one message often
# states several facts ("I'm Laura and I live in Lisbon"), and forgetting one keeps the others.
# A fact said again moves its triple to the later turn, whose reflection left the memory as it
# was and lists it as "left" in the reply's trace (cognition.reflection): that turn counts too.
_RESTATES = f"""t.owner_id = f.owner_id
       AND (t.source_message_id = f.source_message_id
            OR EXISTS (SELECT 1 FROM chat_message AS restated
                        WHERE restated.id = t.source_message_id
                          AND restated.trace -> 'reflection' -> 'left' @> to_jsonb(f.id)))
       AND cardinality({_words("t.object")}) > 0
       AND {_words("t.object")} <@ {_words("f.description || ' ' || f.quote")}"""

# What forgetting a set of nodes (`gone`, already deleted) also deletes of memory's own rows, in
# the same statement: the earlier versions they superseded, their links and critiques, and
# retrieval plans (see `_PLANS_QUOTING`); when a person forgets (`%(turn)s`), also the triples
# that restate them and the episodes of the turns that taught them (an episode's summary may
# paraphrase any statement of its stretch). Postgres checks the foreign keys at commit, so the
# order of the deletes does not matter. The statement returns the forgotten ids per owner, for
# the events that name them (core's) and the answers' traces that list them (chat's).
_FORGET_CASCADE = f"""
history AS (
    DELETE FROM memory_memorynode
     WHERE superseded_by_id IN (SELECT id FROM gone) AND id NOT IN (SELECT id FROM gone)
 RETURNING id, owner_id, description, false AS current, source_message_id, quote
),
forgotten AS (
    SELECT * FROM gone UNION ALL SELECT * FROM history
),
links AS (
    DELETE FROM memory_memorylink
     WHERE source_id IN (SELECT id FROM forgotten) OR target_id IN (SELECT id FROM forgotten)
 RETURNING 1
),
critiques AS (
    DELETE FROM memory_critique WHERE node_id IN (SELECT id FROM forgotten) RETURNING 1
),
plans AS (
    DELETE FROM memory_retrievalplan AS p
     USING chat_conversation AS c
     WHERE c.id = p.conversation_id
       AND {{plans}}
 RETURNING 1
),
triples AS (
    DELETE FROM memory_triple AS t
     WHERE %(turn)s AND EXISTS (SELECT 1 FROM forgotten AS f WHERE {_RESTATES})
 RETURNING t.id
),
episodes AS (
    DELETE FROM memory_episode AS e
     WHERE %(turn)s AND EXISTS (
           SELECT 1
             FROM forgotten AS f
             JOIN chat_message AS reply ON reply.id = f.source_message_id
             JOIN memory_episode_messages AS held
               ON held.message_id IN (reply.id, reply.reply_to_id)
            WHERE held.episode_id = e.id AND e.owner_id = f.owner_id
       )
 RETURNING e.id
),
episode_messages AS (
    DELETE FROM memory_episode_messages WHERE episode_id IN (SELECT id FROM episodes) RETURNING 1
)
SELECT owner_id,
       count(*) FILTER (WHERE current),
       count(*) FILTER (WHERE NOT current),
       array_agg(id),
       array_agg(description),
       (SELECT count(*) FROM critiques),
       (SELECT count(*) FROM links),
       (SELECT count(*) FROM plans),
       (SELECT COALESCE(array_agg(id), '{{}}') FROM triples),
       (SELECT COALESCE(array_agg(id), '{{}}') FROM episodes)
  FROM forgotten
 GROUP BY owner_id
"""

# Decay runs every hour: it drops only the plans that quote a forgotten memory whole. A person
# who forgets a memory drops every plan of theirs, since a plan's queries may paraphrase it (the
# next turn plans again from the message).
_PLANS_QUOTING = """EXISTS (
           SELECT 1 FROM forgotten AS f
            WHERE f.owner_id = c.owner_id
              AND strpos(lower(p.steps::text), lower(btrim(to_jsonb(f.description)::text, '"'))) > 0
       )"""
_PLANS_OF_OWNERS = "c.owner_id IN (SELECT owner_id FROM forgotten)"

# CLAM's decay: a volatile memory nothing confirmed (its confidence is not above the one it
# started with, or is below the minimum score) and that nobody used, restated or changed for the
# decay time is forgotten. Confirmed and promoted memories stay. A quarantined memory is never
# used, so only its owner can vouch for it: left unapproved for the decay time, it is forgotten
# too, whatever its confidence.
_DECAY_SQL = """
WITH gone AS (
    DELETE FROM memory_memorynode
     WHERE valid_to IS NULL
       AND (state = 'quarantined'
            OR state = 'volatile'
               AND (confidence_score <= start_confidence OR confidence_score < %(minimum_score)s))
       AND COALESCE(last_accessed_at, created_at) < now() - make_interval(hours => %(hours)s)
 RETURNING id, owner_id, description, true AS current, source_message_id, quote
),
""" + _FORGET_CASCADE.replace("{plans}", _PLANS_QUOTING)

# A memory and its whole line of versions: the rows it superseded and the rows that superseded it.
_FORGET_SQL = """
WITH RECURSIVE family(id) AS (
    SELECT id FROM memory_memorynode WHERE id = ANY(%(ids)s)
    UNION
    SELECT relative.id
      FROM family
      JOIN memory_memorynode AS node ON node.id = family.id
      JOIN memory_memorynode AS relative
        ON relative.superseded_by_id = node.id OR relative.id = node.superseded_by_id
),
gone AS (
    DELETE FROM memory_memorynode WHERE id IN (SELECT id FROM family)
 RETURNING id, owner_id, description, valid_to IS NULL AS current, source_message_id, quote
),
""" + _FORGET_CASCADE.replace("{plans}", _PLANS_OF_OWNERS)

_RETRACT_SQL = f"""
UPDATE memory_triple AS t
   SET valid_to = now()
  FROM memory_memorynode AS f
 WHERE f.id = %s
   AND t.valid_to IS NULL
   AND {_RESTATES}
RETURNING t.id
"""


@dataclass
class ForgetReceipt:
    """What one act of forgetting deleted, per kind of row."""

    memories: int = 0
    versions: int = 0
    critiques: int = 0
    links: int = 0
    episodes: int = 0
    triples: int = 0
    events: int = 0
    plans: int = 0
    traces: int = 0
    per_owner: dict[int | None, int] = field(default_factory=dict)

    _WORDS = {
        "memories": ("memory", "memories"),
        "versions": ("earlier version", "earlier versions"),
        "critiques": ("critique", "critiques"),
        "links": ("link", "links"),
        "episodes": ("episode", "episodes"),
        "triples": ("fact", "facts"),
        "events": ("event", "events"),
        "plans": ("retrieval plan", "retrieval plans"),
        "traces": ("answer's trace", "answers' traces"),
    }

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self._WORDS}

    @property
    def sentence(self) -> str:
        """ "Forgot 1 memory, 2 earlier versions, 3 critiques." — the memories always, the rest
        when there were any."""
        parts = [
            f"{count} {self._WORDS[name][count != 1]}"
            for name, count in self.as_dict().items()
            if count or name == "memories"
        ]
        return "Forgot " + ", ".join(parts) + "."


def _forget(sql: str, params: dict, *, by_person: bool) -> ForgetReceipt:
    """Run a forgetting statement, then have core and chat drop what names the forgotten nodes
    (and the triples and episodes that went with them), and what may paraphrase them: all of
    it when a person forgets, only what quotes them whole when decay does.

    The caller holds the transaction: all of it is kept, or none.
    """
    receipt = ForgetReceipt()
    node_ids: list[int] = []
    texts: list[str] = []
    triple_ids: list[int] = []
    episode_ids: list[int] = []
    with connection.cursor() as cursor:
        cursor.execute(sql, {**params, "turn": by_person})
        for owner_id, memories, versions, ids, descriptions, *totals in cursor.fetchall():
            receipt.per_owner[owner_id] = memories
            receipt.memories += memories
            receipt.versions += versions
            node_ids += ids
            texts += descriptions
            receipt.critiques, receipt.links, receipt.plans, triple_ids, episode_ids = totals
    receipt.triples, receipt.episodes = len(triple_ids), len(episode_ids)
    if node_ids:
        owner_ids = list(receipt.per_owner)
        users = [owner_id for owner_id in owner_ids if owner_id is not None]
        quoting = None if by_person else texts
        receipt.events = events_delete_mentioning(
            node_ids=node_ids, owner_ids=owner_ids, episode_ids=episode_ids, quoting=quoting
        )
        receipt.traces = message_traces_forget(
            owner_ids=users,
            memory_ids=node_ids,
            triple_ids=triple_ids,
            episode_ids=episode_ids,
            quoting=quoting,
        )
    return receipt


def memories_forget(*, node_ids: list[int]) -> ForgetReceipt:
    """Forget memories with every trace of them: memory's rows in one statement (see
    `_FORGET_CASCADE`: versions, links, critiques, plans, the triples restating them and the
    episodes of their turns), the events and answers' traces naming them through core's and
    chat's services, in one transaction."""
    with transaction.atomic():
        return _forget(_FORGET_SQL, {"ids": list(node_ids)}, by_person=True)


def memories_forget_of_owner(*, owner_id: int) -> ForgetReceipt:
    """Forget everything about one person: memories with all they cascade to, episodes,
    triples, the mind's events about them, their retrieval plans, their world state and what
    their answers' traces quote or paraphrase. Their conversations stay; global knowledge
    stays. Records nothing: `browser_services.memories_forget_all_recorded` is the person's own
    request."""
    with transaction.atomic():
        node_ids = list(MemoryNode.objects.filter(owner_id=owner_id).values_list("id", flat=True))
        receipt = _forget(_FORGET_SQL, {"ids": node_ids}, by_person=True)
        _, deleted = Episode.objects.filter(owner_id=owner_id).delete()
        receipt.episodes += deleted.get(Episode._meta.label, 0)
        _, deleted = Triple.objects.filter(owner_id=owner_id).delete()
        receipt.triples += deleted.get(Triple._meta.label, 0)
        receipt.events += events_delete_of_owner(owner_id=owner_id)
        receipt.plans += RetrievalPlan.objects.filter(conversation__owner_id=owner_id).delete()[0]
        WorldState.objects.filter(owner_id=owner_id).delete()
        receipt.traces = message_traces_forget_all_memories(owner_id=owner_id)
    return receipt


def triples_forget(*, owner_id: int, triple_ids: list[int]) -> int:
    """Forget some of a person's facts, with the notes quoting them in their answers' traces
    and what may paraphrase them (their retrieval plans, the plan steps and debates of their
    traces and events); how many facts went. The caller holds the transaction."""
    mine = Triple.objects.filter(owner_id=owner_id, id__in=triple_ids)
    forgotten = list(mine.values_list("id", flat=True))
    if forgotten:
        mine.delete()
        _forget_paraphrases(owner_id=owner_id, triple_ids=forgotten)
    return len(forgotten)


def episodes_forget(*, owner_id: int, episode_ids: list[int]) -> int:
    """Forget some of a person's episodes, with the events and the notes in their answers'
    traces quoting them and what may paraphrase them; how many went. The caller holds the
    transaction."""
    mine = Episode.objects.filter(owner_id=owner_id, id__in=episode_ids)
    forgotten = list(mine.values_list("id", flat=True))
    if forgotten:
        mine.delete()
        _forget_paraphrases(owner_id=owner_id, episode_ids=forgotten)
    return len(forgotten)


def _forget_paraphrases(
    *, owner_id: int, triple_ids: Sequence[int] = (), episode_ids: Sequence[int] = ()
) -> None:
    RetrievalPlan.objects.filter(conversation__owner_id=owner_id).delete()
    events_delete_mentioning(node_ids=[], owner_ids=[owner_id], episode_ids=episode_ids)
    message_traces_forget(owner_ids=[owner_id], triple_ids=triple_ids, episode_ids=episode_ids)


def triples_retract_restating(*, node: MemoryNode) -> list[int]:
    """Close the current triples that restate a memory (see `_RESTATES`), when it is marked
    wrong: the Facts page and the knowledge block stop showing them, as recall stops using the
    memory. Their ids."""
    with connection.cursor() as cursor:
        cursor.execute(_RETRACT_SQL, [node.pk])
        return [triple_id for (triple_id,) in cursor.fetchall()]


def memories_decay(*, decay_hours: int, minimum_score: int) -> dict[int | None, int]:
    """Forget stale, unconfirmed volatile nodes and those left unapproved in quarantine, in one
    statement; deletions per owner.

    The conditions live in the DELETE's own WHERE: a node that another transaction touches
    (last access, a critic's +1, a promotion) while this runs is re-checked by PostgreSQL
    after that transaction commits, and survives. What forgetting a node also deletes of
    memory's (its versions, links, critiques, the plans quoting it) goes in the same statement;
    the events and traces naming it follow in the same transaction.
    """
    with transaction.atomic():
        receipt = _forget(
            _DECAY_SQL,
            {"minimum_score": minimum_score, "hours": int(decay_hours)},
            by_person=False,
        )
        events_record(
            [
                Event(
                    kind=Event.Kind.DECAY,
                    summary=(
                        f"Forgot {count} memor{'y' if count == 1 else 'ies'} nobody confirmed "
                        "or used for a while."
                    ),
                    owner_id=owner_id,
                    payload={
                        "deleted": count,
                        "decay_hours": decay_hours,
                        "minimum_score": minimum_score,
                    },
                )
                for owner_id, count in receipt.per_owner.items()
            ]
        )
    return receipt.per_owner
