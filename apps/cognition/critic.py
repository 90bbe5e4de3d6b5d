"""The sceptical critic (CLAM): a devil's advocate doubts the memories a turn touched.

Each judged node gets a written debate and a verdict: withstands (+1) or fails (−1); a failing
verdict on the user's own words is kept and moves nothing (critique_record): the critic doubts
what was inferred, not what the user said. The critic is shown what could contradict the node
— the owner's nearest long-term (promoted) memories first, then unconfirmed ones, and the known
facts that share its words — and a known memory it names as contradicted or supported gets a
`contradicts` or `supports` link. A critique is unique
per node and turn, so a redelivered task never counts a verdict twice; a sweep reviews the
volatile nodes no turn ever brought before the critic, oldest first. A node the critic cannot
judge (a reply it cannot read, a refusal, a prompt too long, a fault of ours) gets an error event
naming it, and the sweep leaves it alone; a turn's outcome, its verdicts and failures with why,
is kept in its reply's trace.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Exists, IntegerField, OuterRef, Q
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.utils import timezone

from apps.chat import services as chat_services
from apps.chat.models import Message
from apps.cognition.reflection import (
    NOTHING_YET,
    TRACE_KEY,
    exchange_lines,
    node_line,
)
from apps.cognition.schemas import critic_verdict_schema
from apps.core.llm.fitting import bodies, fixed_lines, ranked_lines, template_prompt
from apps.core.llm.limits import CRITIC, role_endpoint
from apps.core.llm.outcomes import InvalidReply, Preempted, Refused, TooLong, Unreachable
from apps.core.llm.structured import complete_as
from apps.core.models import Event, RuntimeConfig
from apps.core.selectors import runtime_config
from apps.core.services import event_record
from apps.language.text import words
from apps.memory import critique_services
from apps.memory import selectors as memory_selectors
from apps.memory import services as memory_services
from apps.memory.models import Critique, MemoryLink, MemoryNode, Triple
from apps.memory.provenance import conversation_marker, datamark, marker_system
from apps.memory.query_text import STOPWORDS

logger = logging.getLogger(__name__)

# The critic's outcome in a reply's trace (critic_outcome_record).
TRACE_KEY_CRITIC = "critic"
# LLM calls one sweep may make: on a one-slot server the chat must not wait behind a backlog.
SWEEP_MAX_NODES = 3
# Facts shown to the critic beside the nearest memories.
MAX_FACTS = 10


def nodes_to_doubt(*, reply: Message, limit: int) -> list[MemoryNode]:
    """The volatile nodes this turn formed or restated, then others on the same topics."""
    outcome = reply.trace.get(TRACE_KEY) or {}
    touched = [*outcome.get("created", []), *outcome.get("updated", []), *outcome.get("left", [])]
    volatile = MemoryNode.objects.filter(
        owner=reply.conversation.owner, state=MemoryNode.State.VOLATILE, valid_to=None
    )
    first = list(volatile.filter(pk__in=touched).order_by("pk")[:limit])
    topics = {node.topic.casefold() for node in first if node.topic}
    if len(first) >= limit or not topics:
        return first
    same_topic = Q()
    for topic in topics:
        same_topic |= Q(topic__iexact=topic)
    others = volatile.filter(same_topic).exclude(pk__in=[node.pk for node in first])
    return first + list(others.order_by("-created_at")[: limit - len(first)])


def unreviewed_nodes(*, limit: int) -> list[MemoryNode]:
    """Volatile nodes the critic never judged nor failed to judge for good, oldest first: a
    node it cannot judge would otherwise hold a place in every sweep."""
    failed = Event.objects.filter(kind=Event.Kind.ERROR, payload__step="critique").annotate(
        node_id=Cast(KeyTextTransform("node_id", "payload"), IntegerField())
    )
    return list(
        MemoryNode.objects.filter(state=MemoryNode.State.VOLATILE, valid_to=None)
        .exclude(owner=None)
        .filter(~Exists(Critique.objects.filter(node=OuterRef("pk"))))
        .filter(~Exists(failed.filter(node_id=OuterRef("pk"))))
        .select_related("owner", "source_message__reply_to")
        .order_by("created_at", "pk")[:limit]
    )


def _words(text: str) -> set[str]:
    return {word for word in words(text.replace("_", " ")) if len(word) > 2}


def _facts_about(*, node: MemoryNode, triples: list[Triple], marker: str) -> list[str]:
    """The owner's facts sharing a word with the node (its predicate's too), most shared first;
    datamarked (the knowledge graph's triples are data)."""
    said = _words(f"{node.topic} {node.description}") - STOPWORDS - {"user"}
    shared = []
    for triple in triples:
        common = len(said & _words(f"{triple.subject} {triple.predicate.name} {triple.object}"))
        if common:
            fact = f"{triple.subject} {triple.predicate.name} {triple.object}"
            shared.append((common, f"fact: {datamark(fact, marker)}"))
    shared.sort(key=lambda pair: pair[0], reverse=True)
    return [line for _, line in shared[:MAX_FACTS]]


def _known_for(*, node: MemoryNode, limit: int) -> list[tuple[MemoryNode, float]]:
    """The owner's nearest long-term memories, then the nearest unconfirmed ones."""
    if node.embedding is None:
        return []
    return [
        near
        for state in (MemoryNode.State.PROMOTED, MemoryNode.State.VOLATILE)
        for near in memory_services.memory_nodes_near(
            owner_id=node.owner_id,
            vector=list(node.embedding),
            limit=limit,
            state=state,
            exclude_ids=[node.pk],
        )
    ]


def node_criticise(
    *, node: MemoryNode, message: Message | None, config: RuntimeConfig
) -> Critique | None:
    """Ask the critic to doubt one node; None when it already judged it for this turn."""
    owner = node.owner
    model = role_endpoint(CRITIC, config).model
    known = _known_for(node=node, limit=config.max_memory_results)
    long_term = {MemoryNode.State.PROMOTED: "long-term", MemoryNode.State.VOLATILE: "unconfirmed"}
    # A prompt of no conversation: a random datamark (apps.memory.provenance).
    marker = conversation_marker(None)
    facts = _facts_about(
        node=node,
        triples=list(memory_selectors.knowledge_triples_for(user_id=owner.pk)),
        marker=marker,
    )
    exchange = message or node.source_message
    lines = [node_line(node, marker)]
    known_lines = [
        f"{node_line(near, marker)} ({long_term[near.state]})" for near, _ in known
    ] + facts
    exchanged = exchange_lines(exchange, marker) if exchange else []
    prompt = template_prompt(
        "criticise",
        slots={
            "memory": fixed_lines(lines),
            "known": ranked_lines(known_lines),
            "exchange": bodies(exchanged),
        },
        empty=NOTHING_YET,
        system=marker_system(marker, [*lines, *known_lines, *exchanged]),
    )
    try:
        verdict = complete_as(
            critic_verdict_schema([near.pk for near, _ in known]), role="critic", prompt=prompt
        )
    except (InvalidReply, Refused, TooLong) as exc:
        # Asking again would not mend these; an Unreachable server goes to the task's retries.
        raise CritiqueFailed(str(exc)) from exc
    similarity = {near.pk: (near, score) for near, score in known}
    contradicts = [pk for pk in verdict.contradicts if pk in similarity]
    supports = [pk for pk in verdict.supports if pk in similarity and pk not in contradicts]
    with transaction.atomic():
        # The node's lock makes a concurrent sweep wait, then see this critique and stop.
        MemoryNode.objects.select_for_update().filter(pk=node.pk).first()
        if Critique.objects.filter(node=node, message=message).exists():
            return None
        critique = critique_services.critique_record(
            node_id=node.pk,
            message=message,
            verdict=verdict.verdict,
            debate=verdict.debate,
            model=model,
            contradicts=contradicts,
            supports=supports,
        )
        if critique is None:
            return None
        for kind, ids in (
            (MemoryLink.Kind.CONTRADICTS, contradicts),
            (MemoryLink.Kind.SUPPORTS, supports),
        ):
            for pk in ids:
                target, score = similarity[pk]
                memory_services.memory_link_upsert(
                    source=node, target=target, kind=kind, score=score
                )
    return critique


def criticise_turn(*, message_id: int) -> list[Critique]:
    """Judge the nodes the turn touched; what came of it is kept in the reply's trace."""
    config = runtime_config()
    if not config.critic_enabled:
        return []
    reply = (
        Message.objects.select_related("conversation__owner", "reply_to")
        .filter(pk=message_id, role=Message.Role.ASSISTANT)
        .first()
    )
    if reply is None:
        return []
    already = set(Critique.objects.filter(message=reply).values_list("node_id", flat=True))
    critiques = []
    failed = []
    for node in nodes_to_doubt(reply=reply, limit=config.max_memory_results):
        if node.pk in already:
            continue
        try:
            critique = _criticise_or_record(node=node, message=reply, config=config)
        except CritiqueFailed as exc:
            failed.append({"node": node.pk, "error": str(exc)})
            continue
        if critique is not None:
            critiques.append(critique)
    critic_outcome_record(message_id=reply.pk, failed=failed)
    return critiques


def criticise_unreviewed(*, limit: int = SWEEP_MAX_NODES) -> list[Critique]:
    """Judge up to `limit` volatile nodes no critic ever judged nor failed to, oldest first."""
    config = runtime_config()
    if not config.critic_enabled:
        return []
    critiques = []
    for node in unreviewed_nodes(limit=limit):
        try:
            critique = _criticise_or_record(node=node, message=None, config=config)
        except CritiqueFailed:
            continue
        if critique is not None:
            critiques.append(critique)
    return critiques


class CritiqueFailed(Exception):
    """The critic could not judge a node, for a reason asking again would not mend."""


def _criticise_or_record(
    *, node: MemoryNode, message: Message | None, config: RuntimeConfig
) -> Critique | None:
    """node_criticise; when it fails for good, an error event names the node (the sweep does
    not take it again) and CritiqueFailed says why."""
    try:
        return node_criticise(node=node, message=message, config=config)
    except (Unreachable, Preempted):
        raise
    except Exception as exc:
        error = str(exc) if isinstance(exc, CritiqueFailed) else _unexpected(exc)
        event_record(
            kind=Event.Kind.ERROR,
            summary=f"I could not check a memory: {error}",
            owner=node.owner,
            payload={
                "step": "critique",
                "message_id": message.pk if message else None,
                "node_id": node.pk,
                "error": error[:2000],
            },
        )
        raise CritiqueFailed(error) from exc


def _unexpected(exc: Exception) -> str:
    logger.error("critique failed", exc_info=exc)
    return f"unexpected error: {type(exc).__name__}: {exc}"[:500]


def critic_outcome_record(*, message_id: int, failed: list[dict], error: str = "") -> None:
    """The critic's outcome in the reply's trace: the verdicts on the nodes it judged for this
    turn, the nodes it could not judge and why, and `error` when it gave up on the turn."""
    judged = [
        {"node": node_id, "verdict": verdict, "delta": delta}
        for node_id, verdict, delta in Critique.objects.filter(message_id=message_id)
        .order_by("node_id")
        .values_list("node_id", "verdict", "delta")
    ]
    outcome = {"judged": judged, "failed": failed, "at": timezone.now().isoformat()}
    if error:
        outcome["error"] = error[:500]
    chat_services.message_trace_put(message_id=message_id, key=TRACE_KEY_CRITIC, value=outcome)
