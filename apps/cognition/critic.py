"""The sceptical critic (CLAM): a devil's advocate doubts the memories a turn touched.

Each judged node gets a written debate and a verdict: withstands (+1) or fails (−1). A
critique is unique per node and turn, so a redelivered task never counts a verdict twice.
"""

from __future__ import annotations

import openai
from django.conf import settings
from django.db.models import Q

from apps.chat.models import Message
from apps.cognition.budget import bodies, fill_to_fit, fixed_lines, ranked_lines
from apps.cognition.reflection import (
    NOTHING_YET,
    TRACE_KEY,
    error_record,
    exchange_lines,
    node_line,
)
from apps.cognition.schemas import CriticVerdict, InvalidReply
from apps.cognition.structured import complete_as
from apps.core.llm_limits import CRITIC
from apps.core.selectors import runtime_config
from apps.memory import services as memory_services
from apps.memory.models import Critique, MemoryNode


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


def criticise_turn(*, message_id: int) -> list[Critique]:
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
    owner = reply.conversation.owner
    model = config.critic_model or config.chat_model or settings.THALAMUS_CHAT_MODEL
    already = set(Critique.objects.filter(message=reply).values_list("node_id", flat=True))
    critiques = []
    for node in nodes_to_doubt(reply=reply, limit=config.max_memory_results):
        if node.pk in already:
            continue
        known = []
        if node.embedding is not None:
            known = [
                near
                for near, _ in memory_services.memory_nodes_near(
                    owner_id=owner.pk,
                    vector=list(node.embedding),
                    limit=config.max_memory_results,
                    exclude_ids=[node.pk],
                )
            ]
        prompt = fill_to_fit(
            "criticise",
            role=CRITIC,
            slots={
                "memory": fixed_lines([node_line(node)]),
                "known": ranked_lines([node_line(near) for near in known]),
                "exchange": bodies(exchange_lines(reply)),
            },
            empty=NOTHING_YET,
        )
        try:
            verdict = complete_as(
                CriticVerdict, role="critic", messages=[{"role": "user", "content": prompt}]
            )
        except (InvalidReply, openai.BadRequestError, openai.APIResponseValidationError) as exc:
            error_record(owner=owner, step="critique", message_id=reply.pk, error=str(exc))
            continue
        known_ids = {near.pk for near in known}
        critique = memory_services.critique_record(
            node_id=node.pk,
            message=reply,
            verdict=verdict.verdict,
            debate=verdict.debate,
            model=model,
            contradicts=[pk for pk in verdict.contradicts if pk in known_ids],
            supports=[pk for pk in verdict.supports if pk in known_ids],
        )
        if critique is not None:
            critiques.append(critique)
    return critiques
