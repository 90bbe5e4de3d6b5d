"""Remembering: what reflection writes from the statements it found in a reply's user message.

One transaction per reply: the claim (a key in the reply's trace, set by a conditional UPDATE),
the memories (added, updated, or confirmed when said again; an instruction held for approval),
the triples, the outcome in the trace, the perception event and the receipt's push.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from apps.accounts.selectors import user_settings_for
from apps.chat import broadcasts
from apps.chat import services as chat_services
from apps.chat.models import Message
from apps.cognition import statements as statement_rules
from apps.cognition.statements import Statement
from apps.core.models import Event
from apps.core.services import event_record
from apps.memory import services as memory_services
from apps.memory.embedding import EmbeddingError, get_embedder
from apps.memory.models import MemoryNode
from apps.memory.quarantine import looks_like_instruction
from apps.memory.schemas import same_text

logger = logging.getLogger(__name__)


TRACE_KEY = "reflection"
STARTING_CONFIDENCE = 1
# How a withheld fact of no category is counted in the outcome's "withheld" categories.
UNCLASSIFIED = "unclassified"


def _embed(texts: list[str]) -> list[list[float]] | None:
    try:
        return get_embedder().embed(texts)
    except EmbeddingError as exc:
        logger.warning("reflection without vectors: %s", exc)
        return None


# The background steps, as the mind stream names them to the user.
STEP_WORDS = {
    "reflection": "learning from a message",
    "critique": "checking a memory",
    "episode": "summing up a conversation",
}


def error_record(*, owner, step: str, message_id: int | None, error: str) -> Event:
    return event_record(
        kind=Event.Kind.ERROR,
        summary=f"I could not finish {STEP_WORDS.get(step, step)}: {error}",
        owner=owner,
        payload={"step": step, "message_id": message_id, "error": error[:2000]},
    )


def remember_all(
    *,
    reply: Message,
    found: list[Statement],
    rejected: list[dict],
    stated: bool,
    failure: dict | None = None,
) -> dict | None:
    """Write what one reply's user message stated, with its claim, in one transaction; None
    when another run claimed it first.

    `stated`: the message stated something about the user, by the model's grounded quotes or
    by the rules' first-person signals; the write rate counts only such turns. `failure`: the
    model's error and attempts when it could not be asked, which the outcome keeps and an
    error event tells.
    """
    owner = reply.conversation.owner
    outcome: dict = {
        "created": [],
        "updated": [],
        "left": [],
        "rejected": rejected,
        "triples": [],
        "stated": stated,
    }
    if failure is not None:
        outcome.update(error=failure["error"][:500], attempts=failure["attempts"])
    allowed = set(user_settings_for(user=owner).learn_categories)
    kept = []
    for statement in found:
        if statement_rules.category_allowed(statement.category, allowed=allowed):
            kept.append(statement)
        else:
            _withhold(outcome, "memories", statement.category or UNCLASSIFIED)
    vectors = _embed([statement.description for statement in kept]) if kept else None
    with transaction.atomic():
        claim = {"at": timezone.now().isoformat()}
        if not chat_services.message_trace_claim(message_id=reply.pk, key=TRACE_KEY, value=claim):
            return None
        for index, statement in enumerate(kept):
            _remember(
                statement=statement,
                vector=vectors[index] if vectors else None,
                reply=reply,
                outcome=outcome,
            )
            if statement.triple is None or looks_like_instruction(statement.quote):
                continue
            predicate, value, category = statement.triple
            if category not in allowed:
                _withhold(outcome, "triples", category)
                continue
            try:
                stored = memory_services.triple_upsert(
                    owner=owner,
                    subject="user",
                    predicate=predicate,
                    object=value,
                    category=category,
                    confidence=0.8,
                    provenance=f"reflection on message {reply.pk}",
                    source_message=reply,
                )
            except ValueError:
                continue
            outcome["triples"].append(stored.pk)
        outcome["taught"] = any(
            outcome.get(key) for key in ("created", "updated", "left", "quarantined")
        )
        if failure is not None:
            error_record(
                owner=owner, step="reflection", message_id=reply.pk, error=failure["error"]
            )
        chat_services.message_trace_put(
            message_id=reply.pk, key=TRACE_KEY, value={**outcome, "at": timezone.now().isoformat()}
        )
        event_record(
            kind=Event.Kind.PERCEPTION,
            summary=perception_sentence(outcome),
            owner=owner,
            payload={"message_id": reply.pk, "conversation_id": reply.conversation_id, **outcome},
        )
        broadcasts.receipt_changed(message_id=reply.pk)
    return outcome


def _things(count: int) -> str:
    return f"{count} new thing{'s' if count != 1 else ''}"


def perception_sentence(outcome: dict) -> str:
    """What reflecting on a message did, as the user reads it in the mind stream: "Learned 2
    new things about you.", "Read your last message; nothing new to remember." """
    created, updated = len(outcome["created"]), len(outcome["updated"])
    confirmed = len(outcome.get("confirmed") or [])
    held = len(outcome.get("quarantined") or [])
    done = []
    if created:
        done.append(f"learned {_things(created)} about you")
    if updated:
        done.append(f"updated {updated} thing{'s' if updated != 1 else ''} I knew")
    if confirmed:
        done.append(f"confirmed {confirmed} thing{'s' if confirmed != 1 else ''} I knew")
    if held:
        reads = "reads" if held == 1 else "read"
        done.append(f"set aside {held} that {reads} like an order to me, for your approval")
    if not done:
        return "Read your last message; nothing new to remember."
    sentence = done[0] if len(done) == 1 else ", ".join(done[:-1]) + " and " + done[-1]
    return sentence[0].upper() + sentence[1:] + "."


def _withhold(outcome: dict, what: str, category: str) -> None:
    """Count what was not stored because the user does not let its category be learnt."""
    withheld = outcome.setdefault("withheld", {"memories": 0, "triples": 0, "categories": []})
    withheld[what] += 1
    if category not in withheld["categories"]:
        withheld["categories"].append(category)


def _remember(
    *, statement: Statement, vector: list[float] | None, reply: Message, outcome: dict
) -> None:
    """Add, update or leave one memory — never a second copy of one already held."""
    owner = reply.conversation.owner
    target = None
    if statement.fact_key:
        target = MemoryNode.objects.filter(
            owner=owner, fact_key=statement.fact_key, valid_to=None
        ).first()
    held = looks_like_instruction(statement.description) or looks_like_instruction(statement.quote)
    restated = False
    if target is None:
        # The same words, or near-identical ones with a near-identical vector (the service's
        # rule): a memory said again, confirmed; never a second row.
        target = memory_services.memory_node_said_before(
            owner=owner, description=statement.description, vector=vector, quarantined=held
        )
        restated = target is not None
    if target is not None and (restated or same_text(target.description, statement.description)):
        _confirmed(memory_services.memory_node_restate(node=target, source_message=reply), outcome)
        return
    source = MemoryNode.Source.USER
    if "imported" in reply.trace:
        # A reply of a conversation imported from another assistant (apps.imports).
        source = MemoryNode.Source.IMPORTED
    # An instruction to the assistant is held apart, whatever it was meant to update: no fact
    # key to evolve a trusted memory, and a state that recall, promotion and the critic never
    # touch until it is approved.
    if target is not None and not held:
        node = memory_services.memory_node_revise(
            node=target,
            description=statement.description,
            importance=statement.importance,
            origin_context=statement.quote,
            source_message=reply,
            source=source,
            quote=statement.quote,
        )
        _give_end(node, statement)
        outcome["updated"].append(node.pk)
        return
    node = memory_services.memory_node_create(
        owner=owner,
        description=statement.description,
        kind=statement.kind,
        topic=statement.topic,
        fact_key="" if held else statement.fact_key,
        importance=statement.importance,
        origin_context=statement.quote,
        source_message=reply,
        source=source,
        quote=statement.quote,
        confidence_score=STARTING_CONFIDENCE,
        state=MemoryNode.State.QUARANTINED if held else MemoryNode.State.VOLATILE,
        vector=vector,
    )
    if getattr(node, "restated", False):
        _confirmed(node, outcome)
        return
    if held:
        outcome.setdefault("quarantined", []).append(node.pk)
        return
    _give_end(node, statement)
    outcome["created"].append(node.pk)


def _confirmed(node: MemoryNode, outcome: dict) -> None:
    """A memory the reply said again: left as one row (`left`, which retraction and the critic
    read) and confirmed by it, as the receipt says; said twice in one reply, it is one new
    memory, neither left nor confirmed."""
    this_reply = [*outcome["created"], *outcome["updated"], *outcome.get("quarantined", [])]
    if node.pk in this_reply:
        return
    outcome["left"].append(node.pk)
    if node.pk not in outcome.setdefault("confirmed", []):
        outcome["confirmed"].append(node.pk)


def _give_end(node: MemoryNode, statement: Statement) -> None:
    """A fact true only for a while ends with its last day; decay closes it after that."""
    if statement.valid_until is not None:
        last_moment = datetime.combine(statement.valid_until, datetime.max.time())
        memory_services.memory_node_set_validity(
            node=node, valid_until=timezone.make_aware(last_moment)
        )
