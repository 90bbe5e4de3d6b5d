"""Reflection: after a completed reply, one LLM call decides what the turn taught.

The only place memories are formed from conversation. A reply is reflected on at most once:
the claim (a key in the reply's trace, set by a conditional UPDATE) commits in the same
transaction as every write, so a task killed before the commit leaves nothing behind and a
redelivered or duplicated task finds the claim and writes nothing.
"""

from __future__ import annotations

import logging

import openai
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.chat.models import Message
from apps.cognition.prompts import render_prompt
from apps.cognition.schemas import InvalidReply, LearntMemory, Reflection, complete_as
from apps.core.models import Event
from apps.core.selectors import runtime_config
from apps.core.services import event_record
from apps.memory import services as memory_services
from apps.memory.embedding import EmbeddingError, get_embedder
from apps.memory.models import MemoryNode

logger = logging.getLogger(__name__)

TRACE_KEY = "reflection"
NOTHING_YET = "(nothing yet)"


def exchange_text(reply: Message) -> str:
    lines = []
    if reply.reply_to_id is not None:
        lines.append(f"user: {reply.reply_to.content}")
    lines.append(f"assistant: {reply.content}")
    return "\n".join(lines)


def memory_lines(nodes: list[MemoryNode]) -> str:
    if not nodes:
        return NOTHING_YET
    return "\n".join(
        f"[{node.pk}] {node.kind}, topic {node.topic or '-'}, key {node.fact_key or '-'}: "
        f"{node.description}"
        for node in nodes
    )


def _embed(texts: list[str]) -> list[list[float]] | None:
    try:
        return get_embedder().embed(texts)
    except EmbeddingError as exc:
        logger.warning("reflection without vectors: %s", exc)
        return None


def reflectable_reply(message_id: int) -> Message | None:
    return (
        Message.objects.select_related("conversation__owner", "reply_to")
        .filter(pk=message_id, role=Message.Role.ASSISTANT, status=Message.Status.COMPLETE)
        .first()
    )


def error_record(*, owner, step: str, message_id: int | None, error: str) -> Event:
    return event_record(
        kind=Event.Kind.ERROR,
        summary=f"{step} failed: {error}",
        owner=owner,
        payload={"step": step, "message_id": message_id, "error": error[:2000]},
    )


def _claim(message_id: int, outcome: dict) -> bool:
    """Mark the reply reflected on; False when another run already did (or is doing) it."""
    import json

    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE chat_message
               SET trace = trace || jsonb_build_object(%s::text, %s::jsonb)
             WHERE id = %s AND NOT jsonb_exists(trace, %s)
            """,
            [TRACE_KEY, json.dumps(outcome), message_id, TRACE_KEY],
        )
        return cursor.rowcount == 1


def _set_outcome(message_id: int, outcome: dict) -> None:
    import json

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE chat_message SET trace = trace || jsonb_build_object(%s::text, %s::jsonb)"
            " WHERE id = %s",
            [TRACE_KEY, json.dumps(outcome), message_id],
        )


def reflect_on_message(*, message_id: int) -> dict | None:
    """Reflect on one completed reply; the outcome stored in its trace, or None if skipped."""
    config = runtime_config()
    if not config.reflection_enabled:
        return None
    reply = reflectable_reply(message_id)
    if reply is None or TRACE_KEY in reply.trace:
        return None
    owner = reply.conversation.owner
    exchange = exchange_text(reply)
    vectors = _embed([exchange])
    known: list[MemoryNode] = []
    if vectors:
        known = [
            node
            for node, _ in memory_services.memory_nodes_near(
                owner_id=owner.pk, vector=vectors[0], limit=config.max_memory_results
            )
        ]
    prompt = render_prompt("reflect", memories=memory_lines(known), exchange=exchange)
    model = config.chat_model or settings.THALAMUS_CHAT_MODEL
    try:
        reflection = complete_as(
            Reflection, messages=[{"role": "user", "content": prompt}], model=model
        )
    except (InvalidReply, openai.BadRequestError, openai.APIResponseValidationError) as exc:
        with transaction.atomic():
            if _claim(reply.pk, {"error": str(exc)[:500], "at": timezone.now().isoformat()}):
                error_record(owner=owner, step="reflection", message_id=reply.pk, error=str(exc))
        return None
    return _apply(reply=reply, reflection=reflection, known={node.pk: node for node in known})


def _apply(*, reply: Message, reflection: Reflection, known: dict[int, MemoryNode]) -> dict | None:
    config = runtime_config()
    owner = reply.conversation.owner
    texts = [_memory_text(item) for item in reflection.memories]
    vectors = _embed(texts) if texts else []
    outcome: dict = {"created": [], "updated": [], "left": [], "triples": [], "plan_steps": 0}
    with transaction.atomic():
        if not _claim(reply.pk, {"at": timezone.now().isoformat()}):
            return None
        for index, item in enumerate(reflection.memories):
            vector = vectors[index] if vectors else None
            _remember(item=item, vector=vector, reply=reply, known=known, outcome=outcome)
        for triple in reflection.triples:
            try:
                stored = memory_services.triple_upsert(
                    owner=owner,
                    subject=triple.subject,
                    predicate=triple.predicate,
                    object=triple.object,
                    category=triple.category,
                    confidence=triple.confidence,
                    provenance=f"reflection on message {reply.pk}",
                    source_message=reply,
                )
            except ValueError:
                continue
            outcome["triples"].append(stored.pk)
        plan = memory_services.retrieval_plan_save(
            conversation=reply.conversation,
            steps=[step.model_dump(mode="json") for step in reflection.next_retrieval_plan],
        )
        outcome["plan_steps"] = len(plan.steps)
        _set_outcome(reply.pk, {**outcome, "at": timezone.now().isoformat()})
        event_record(
            kind=Event.Kind.PERCEPTION,
            summary=(
                f"reflected on a turn: {len(outcome['created'])} new, "
                f"{len(outcome['updated'])} updated, {len(outcome['left'])} unchanged "
                f"memories; {len(outcome['triples'])} triples"
            ),
            owner=owner,
            payload={"message_id": reply.pk, "conversation_id": reply.conversation_id, **outcome},
        )
        from apps.cognition import tasks

        if config.critic_enabled and (outcome["created"] or outcome["updated"]):
            tasks.criticise.delay_on_commit(reply.pk)
        tasks.summarise_episode_if_due.delay_on_commit(reply.conversation_id)
    return outcome


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def _memory_text(item: LearntMemory) -> str:
    return f"{item.topic}: {item.description}" if item.topic else item.description


def _remember(
    *,
    item: LearntMemory,
    vector: list[float] | None,
    reply: Message,
    known: dict[int, MemoryNode],
    outcome: dict,
) -> None:
    """Add, update or leave one memory — never a second copy of one already held."""
    owner = reply.conversation.owner
    target = None
    if item.existing_id in known:
        target = MemoryNode.objects.filter(pk=item.existing_id, valid_to=None).first()
    if target is None and item.fact_key:
        target = MemoryNode.objects.filter(
            owner=owner, fact_key=item.fact_key, valid_to=None
        ).first()
    restated = False
    if target is None and vector is not None:
        near = memory_services.memory_nodes_near(owner_id=owner.pk, vector=vector, limit=1)
        if near and near[0][1] >= runtime_config().duplicate_similarity:
            target, restated = near[0][0], True
    if target is not None and (
        item.action == "leave" or restated or _same_text(target.description, item.description)
    ):
        outcome["left"].append(target.pk)
        return
    if item.action == "leave":
        return
    if target is not None:
        node = memory_services.memory_node_revise(
            node=target,
            description=item.description,
            importance=item.importance,
            origin_context=item.origin,
            source_message=reply,
        )
        outcome["updated"].append(node.pk)
        return
    node = memory_services.memory_node_create(
        owner=owner,
        description=item.description,
        kind=item.kind,
        topic=item.topic,
        fact_key=item.fact_key,
        importance=item.importance,
        origin_context=item.origin,
        source_message=reply,
        vector=vector,
    )
    outcome["created"].append(node.pk)
