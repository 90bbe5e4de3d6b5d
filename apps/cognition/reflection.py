"""Reflection: after a completed reply, one LLM call decides what the turn taught.

The only place memories are formed from conversation. A reply is reflected on at most once:
the claim (a key in the reply's trace, set by a conditional UPDATE) commits in the same
transaction as every write, so a task killed before the commit leaves nothing behind and a
redelivered or duplicated task finds the claim and writes nothing.
"""

from __future__ import annotations

import logging
from datetime import datetime
from zoneinfo import ZoneInfo

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts.selectors import memory_enabled_for, user_settings_for, user_time_zone
from apps.chat import broadcasts
from apps.chat import services as chat_services
from apps.chat.models import Message
from apps.cognition import grounding
from apps.cognition.quarantine import looks_like_instruction
from apps.cognition.schemas import LearntMemory, LearntTriple, Reflection
from apps.core.llm.fitting import bodies, fixed_lines, ranked_lines, template_prompt
from apps.core.llm.outcomes import InvalidReply, Refused, TooLong
from apps.core.llm.structured import complete_as
from apps.core.models import Event
from apps.core.prompts import PLACEHOLDER
from apps.core.selectors import prompt_text, runtime_config
from apps.core.services import event_record
from apps.memory import selectors as memory_selectors
from apps.memory import services as memory_services
from apps.memory import world_services
from apps.memory.embedding import EmbeddingError, get_embedder
from apps.memory.models import WORLD_MAX_TOPICS, Category, MemoryNode, Predicate
from apps.memory.renderer import render_knowledge
from apps.memory.schemas import canonical_predicate_name, same_text

logger = logging.getLogger(__name__)

TRACE_KEY = "reflection"
NOTHING_YET = "(nothing yet)"
# A memory starts at confidence 1; one claimed as the user's words that the user never wrote
# starts lower, so the critic must vouch for it before it counts as much.
STARTING_CONFIDENCE = 1
UNGROUNDED_CONFIDENCE = 0


def exchange_lines(reply: Message) -> list[str]:
    lines = []
    if reply.reply_to_id is not None:
        lines.append(f"user: {reply.reply_to.content}")
    lines.append(f"assistant: {reply.content}")
    return lines


def exchange_text(reply: Message) -> str:
    return "\n".join(exchange_lines(reply))


def node_line(node: MemoryNode) -> str:
    return (
        f"[{node.pk}] {node.kind}, topic {node.topic or '-'}, key {node.fact_key or '-'}: "
        f"{node.description}"
    )


def memory_lines(nodes: list[MemoryNode]) -> str:
    if not nodes:
        return NOTHING_YET
    return "\n".join(node_line(node) for node in nodes)


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


def reflection_fail(*, reply: Message, error: str, attempts: int) -> bool:
    """Mark the reply's reflection failed for good, once, and say so in an error event."""
    outcome = {
        "error": error[:500],
        "failed": True,
        "attempts": attempts,
        "at": timezone.now().isoformat(),
    }
    with transaction.atomic():
        if not chat_services.message_trace_claim(message_id=reply.pk, key=TRACE_KEY, value=outcome):
            return False
        error_record(
            owner=reply.conversation.owner, step="reflection", message_id=reply.pk, error=error
        )
    return True


def reflect_on_message(
    *, message_id: int, attempts: int = 1, last_attempt: bool = True
) -> dict | None:
    """Reflect on one completed reply; the outcome stored in its trace, or None if skipped.

    An unusable reply from the model raises InvalidReply for the task to try again, unless
    this is the `last_attempt`: then the reply is marked failed.
    """
    config = runtime_config()
    if not config.reflection_enabled:
        return None
    reply = reflectable_reply(message_id)
    if reply is None or TRACE_KEY in reply.trace:
        return None
    owner = reply.conversation.owner
    # A temporary chat, or a user who turned memory off, teaches the memory nothing.
    if reply.conversation.temporary or not memory_enabled_for(user_id=owner.pk):
        return None
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
    prompt = template_prompt(
        "reflect",
        slots={
            # Today where the user is: "tomorrow" in their message is their tomorrow.
            "date": fixed_lines([timezone.localdate(timezone=user_zone(owner)).isoformat()]),
            "memories": ranked_lines([node_line(node) for node in known]),
            "exchange": bodies(exchange_lines(reply)),
        },
        empty=NOTHING_YET,
    )
    try:
        reflection = complete_as(Reflection, role="reflection", prompt=prompt)
        if reflection.memories and all(
            grounding.is_junk(item.description) for item in reflection.memories
        ):
            raise InvalidReply("every memory in the reply is empty or a placeholder")
    except InvalidReply as exc:
        if not last_attempt:
            raise
        reflection_fail(reply=reply, error=str(exc), attempts=attempts)
        return None
    except (Refused, TooLong) as exc:
        reflection_fail(reply=reply, error=str(exc), attempts=attempts)
        return None
    return _apply(reply=reply, reflection=reflection, known={node.pk: node for node in known})


def echo_sources(*, reply: Message, known: list[MemoryNode]) -> list[tuple[str, str]]:
    """What the assistant said or was shown this turn, each with the reason an echo of it is
    not a fact about the user: its reply, its system prompt, the memories and knowledge."""
    config = runtime_config()
    owner = reply.conversation.owner
    recalled_ids = [
        item["id"] for item in (reply.trace.get("memory") or {}).get("memories", []) if "id" in item
    ]
    recalled = MemoryNode.objects.filter(pk__in=recalled_ids).values_list("description", flat=True)
    triples = memory_selectors.knowledge_triples_for(user_id=owner.pk)
    return [
        ("echoes the assistant's reply", reply.content),
        ("echoes the system prompt", PLACEHOLDER.sub("\n", prompt_text("answer"))),
        ("repeats a remembered memory", "\n".join([*recalled, *(n.description for n in known)])),
        (
            "repeats the knowledge block",
            render_knowledge(triples=triples, language=config.renderer_language, user=owner),
        ),
    ]


def memory_grounding(
    *, item: LearntMemory, said: str, sources: list[tuple[str, str]]
) -> tuple[str, str, int] | str:
    """(source, quote, starting confidence) of a proposed memory, or why it is not stored.

    A memory claimed as the user's words is theirs only if its quote is a span of the user's
    message; otherwise it is stored as inferred, less trusted. One that repeats what the
    assistant said or saw, and that the user's message does not support, is not stored.
    """
    if grounding.is_junk(item.description):
        return "empty or placeholder text"
    quoted = item.source == "user" and grounding.quote_found(quote=item.quote, text=said)
    if quoted:
        return MemoryNode.Source.USER, item.quote.strip(), STARTING_CONFIDENCE
    for reason, source in sources:
        if grounding.echoes(item.description, source) and not grounding.supported_by(
            text=item.description, source=source, said=said
        ):
            return reason
    if item.source == "user":
        return MemoryNode.Source.INFERRED, "", UNGROUNDED_CONFIDENCE
    return MemoryNode.Source.INFERRED, "", STARTING_CONFIDENCE


def _apply(*, reply: Message, reflection: Reflection, known: dict[int, MemoryNode]) -> dict | None:
    owner = reply.conversation.owner
    said = reply.reply_to.content if reply.reply_to_id is not None else ""
    sources = echo_sources(reply=reply, known=list(known.values()))
    outcome: dict = {
        "created": [],
        "updated": [],
        "left": [],
        "rejected": [],
        "triples": [],
        "plan_steps": 0,
    }
    allowed = set(user_settings_for(user=owner).learn_categories)
    kept: list[tuple[LearntMemory, tuple[str, str, int] | None]] = []
    for item in reflection.memories:
        if item.action == "leave":
            kept.append((item, None))
            continue
        if item.category is not None and item.category not in allowed:
            _withhold(outcome, "memories", item.category)
            continue
        judged = memory_grounding(item=item, said=said, sources=sources)
        if isinstance(judged, str):
            outcome["rejected"].append({"text": item.description[:200], "reason": judged})
        else:
            kept.append((item, judged))
    texts = [_memory_text(item) for item, _ in kept]
    vectors = _embed(texts) if texts else []
    with transaction.atomic():
        claim = {"at": timezone.now().isoformat()}
        if not chat_services.message_trace_claim(message_id=reply.pk, key=TRACE_KEY, value=claim):
            return None
        for index, (item, judged) in enumerate(kept):
            vector = vectors[index] if vectors else None
            _remember(
                item=item,
                grounded=judged,
                vector=vector,
                reply=reply,
                known=known,
                outcome=outcome,
            )
        for triple in reflection.triples:
            category = _triple_category(triple)
            if category not in allowed:
                _withhold(outcome, "triples", category)
                continue
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
        if reflection.topics:
            outcome["topics"] = _keep_topics_current(owner_id=owner.pk, topics=reflection.topics)
        chat_services.message_trace_put(
            message_id=reply.pk, key=TRACE_KEY, value={**outcome, "at": timezone.now().isoformat()}
        )
        event_record(
            kind=Event.Kind.PERCEPTION,
            summary=(
                f"reflected on a turn: {len(outcome['created'])} new, "
                f"{len(outcome['updated'])} updated, {len(outcome['left'])} unchanged, "
                f"{len(outcome['rejected'])} rejected memories; "
                f"{len(outcome['triples'])} triples"
            ),
            owner=owner,
            payload={"message_id": reply.pk, "conversation_id": reply.conversation_id, **outcome},
        )
        broadcasts.receipt_changed(message_id=reply.pk)
    return outcome


def user_zone(user) -> ZoneInfo:
    return ZoneInfo(user_time_zone(user=user))


def _withhold(outcome: dict, what: str, category: str) -> None:
    """Count what was not stored because the user does not let its category be learnt."""
    withheld = outcome.setdefault("withheld", {"memories": 0, "triples": 0, "categories": []})
    withheld[what] += 1
    if category not in withheld["categories"]:
        withheld["categories"].append(category)


def _triple_category(triple: LearntTriple) -> str:
    """The category a triple would be stored under: its own, else its predicate's."""
    if triple.category:
        return str(triple.category)
    name = canonical_predicate_name(triple.predicate)
    found = (
        Predicate.objects.filter(Q(name=name) | Q(aliases__contains=[name]))
        .order_by("id")
        .values_list("category", flat=True)
        .first()
    )
    return found or Category.KNOWLEDGE


def _keep_topics_current(*, owner_id: int, topics: list[str]) -> dict:
    """The reflection's topics become the world state's current topics (the first few)."""
    change = world_services.world_apply(
        user_id=owner_id,
        ops=[{"op": "set", "path": "topics", "values": topics[:WORLD_MAX_TOPICS]}],
        source="reflection",
    )
    return {
        "topics": list(change.state.topics),
        "version": change.version,
        "rejected": [item["reason"] for item in change.rejected],
    }


def _memory_text(item: LearntMemory) -> str:
    return f"{item.topic}: {item.description}" if item.topic else item.description


def _remember(
    *,
    item: LearntMemory,
    grounded: tuple[str, str, int] | None,
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
        item.action == "leave" or restated or same_text(target.description, item.description)
    ):
        outcome["left"].append(target.pk)
        return
    if item.action == "leave" or grounded is None:
        return
    source, quote, confidence = grounded
    if "imported" in reply.trace:
        # A reply of a conversation imported from another assistant (apps.imports).
        source = MemoryNode.Source.IMPORTED
    # An instruction to the assistant is held apart, whatever it was meant to update: no fact
    # key to evolve a trusted memory, and a state that recall, promotion and the critic never
    # touch until it is approved.
    held = looks_like_instruction(item.description)
    if target is not None and not held:
        node = memory_services.memory_node_revise(
            node=target,
            description=item.description,
            importance=item.importance,
            origin_context=item.origin,
            source_message=reply,
            source=source,
            quote=quote,
        )
        _give_end(node, item)
        outcome["updated"].append(node.pk)
        return
    node = memory_services.memory_node_create(
        owner=owner,
        description=item.description,
        kind=item.kind,
        topic=item.topic,
        fact_key="" if held else item.fact_key,
        importance=item.importance,
        origin_context=item.origin,
        source_message=reply,
        source=source,
        quote=quote,
        confidence_score=confidence,
        state=MemoryNode.State.QUARANTINED if held else MemoryNode.State.VOLATILE,
        vector=vector,
    )
    if held:
        outcome.setdefault("quarantined", []).append(node.pk)
        return
    _give_end(node, item)
    outcome["created"].append(node.pk)


def _give_end(node: MemoryNode, item: LearntMemory) -> None:
    """A fact true only for a while ends with its last day; decay closes it after that."""
    if item.valid_until is not None:
        last_moment = datetime.combine(item.valid_until, datetime.max.time())
        memory_services.memory_node_set_validity(
            node=node, valid_until=timezone.make_aware(last_moment)
        )
