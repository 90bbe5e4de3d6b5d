"""Remembering: what reflection writes from the statements it found in a reply's user message.

One transaction per reply: the claim (a key in the reply's trace, set by a conditional UPDATE),
the memories (added, updated, or confirmed when said again; an instruction held for approval),
the triples, the outcome in the trace, the perception event and the receipt's push.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, fields
from datetime import date, datetime

from django.db import transaction
from django.utils import timezone

from apps.accounts.selectors import user_settings_for
from apps.chat import broadcasts
from apps.chat import services as chat_services
from apps.chat.models import Message
from apps.cognition import statements as statement_rules
from apps.cognition.statements import Statement
from apps.cognition.stream_words import error_record, perception_sentence
from apps.core import metrics
from apps.core.models import Event
from apps.core.services import event_record
from apps.memory import graph_services
from apps.memory import services as memory_services
from apps.memory.embedding import EmbeddingError, get_embedder
from apps.memory.models import MemoryNode
from apps.memory.quarantine import looks_like_instruction
from apps.memory.schemas import same_text

logger = logging.getLogger(__name__)


TRACE_KEY = "reflection"
# What found a statement: the model's quote, the rules' own pass over the message, or both.
FOUND_BY_MODEL = "model"
FOUND_BY_RULES = "rules"
FOUND_BY_BOTH = "both"
STARTING_CONFIDENCE = 1
# How a withheld fact of no category is counted in the outcome's "withheld" categories.
UNCLASSIFIED = "unclassified"


@dataclass(frozen=True)
class Finding:
    """A statement of the user's and what found it (FOUND_BY_*); `corrects`: its message
    opens by taking back what the user said before ("anzi no, …", "sorry, I meant …"), so a
    new value it gives replaces the old one at once rather than waiting as a proposal."""

    statement: Statement
    found_by: str
    corrects: bool = False


def _embed(statements: list[Statement]) -> list[list[float]] | None:
    """The statements' vectors, made before the write's transaction opens, of the text their
    memories are embedded by; None when the embedder is down (then embedded after commit)."""
    texts = [
        MemoryNode(topic=statement.topic, description=statement.description).embedding_text
        for statement in statements
    ]
    try:
        return get_embedder().embed(texts)
    except EmbeddingError as exc:
        logger.warning("reflection without vectors: %s", exc)
        return None


def remember_all(
    *,
    reply: Message,
    found: list[Finding],
    rejected: list[dict],
    stated: bool,
    failure: dict | None = None,
) -> dict | None:
    """Write what one reply's user message stated, with its claim, in one transaction; None
    when another run claimed it first.

    `stated`: the message stated something about the user, by the model's grounded quotes or
    by the rules' first-person signals; the write rate counts only such turns. `failure`: the
    model's error and attempts when it could not be asked, which the outcome keeps and an
    error event tells. The outcome's `found_by` names, per memory, what found it.
    """
    owner = reply.conversation.owner
    outcome: dict = {
        "created": [],
        "updated": [],
        "left": [],
        "rejected": rejected,
        "triples": [],
        "stated": stated,
        "found_by": {},
    }
    if failure is not None:
        outcome.update(error=failure["error"][:500], attempts=failure["attempts"])
    allowed = set(user_settings_for(user=owner).learn_categories)
    kept = []
    for finding in found:
        category = finding.statement.category
        if statement_rules.category_allowed(category, allowed=allowed):
            kept.append(finding)
        else:
            _withhold(outcome, "memories", category or UNCLASSIFIED)
    vectors = _embed([finding.statement for finding in kept]) if kept else None
    with transaction.atomic():
        claim = {"at": timezone.now().isoformat()}
        if not chat_services.message_trace_claim(message_id=reply.pk, key=TRACE_KEY, value=claim):
            return None
        for index, finding in enumerate(kept):
            _learn(
                finding=finding,
                vector=vectors[index] if vectors else None,
                reply=reply,
                outcome=outcome,
                allowed=allowed,
                sure=finding.found_by != FOUND_BY_RULES or finding.corrects,
            )
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


def _learn(
    *,
    finding: Finding,
    vector: list[float] | None,
    reply: Message,
    outcome: dict,
    allowed: set[str],
    sure: bool,
) -> MemoryNode | None:
    """One statement's memory, and its triple; None when the statement only proposed a change."""
    statement = finding.statement
    node = _remember(
        statement=statement,
        found_by=finding.found_by,
        vector=vector,
        reply=reply,
        outcome=outcome,
        sure=sure,
    )
    if node is None or statement.triple is None or _reads_as_instruction(statement, reply):
        return node
    predicate, value, category = statement.triple
    if category not in allowed:
        _withhold(outcome, "triples", category)
        return node
    try:
        stored = graph_services.triple_upsert(
            owner=reply.conversation.owner,
            subject="user",
            predicate=predicate,
            object=value,
            category=category,
            confidence=0.8,
            provenance=f"reflection on message {reply.pk}",
            source_message=reply,
        )
    except ValueError:
        return node
    outcome["triples"].append(stored.pk)
    return node


def _withhold(outcome: dict, what: str, category: str) -> None:
    """Count what was not stored because the user does not let its category be learnt."""
    withheld = outcome.setdefault("withheld", {"memories": 0, "triples": 0, "categories": []})
    withheld[what] += 1
    if category not in withheld["categories"]:
        withheld["categories"].append(category)


def _remember(
    *,
    statement: Statement,
    found_by: str,
    vector: list[float] | None,
    reply: Message,
    outcome: dict,
    sure: bool,
) -> MemoryNode | None:
    """Add, update or leave one memory — never a second copy of one already held; the memory,
    or None when it only proposed a new value of a fact (see `_propose`)."""
    owner = reply.conversation.owner
    target = None
    if statement.fact_key:
        target = MemoryNode.objects.filter(
            owner=owner, fact_key=statement.fact_key, valid_to=None
        ).first()
    held = _reads_as_instruction(statement, reply)
    restated = False
    if target is None:
        # The same words, or near-identical ones with a near-identical vector (the service's
        # rule): a memory said again, confirmed; never a second row.
        target = memory_services.memory_node_said_before(
            owner=owner, description=statement.description, vector=vector, quarantined=held
        )
        restated = target is not None
    if target is not None and (restated or same_text(target.description, statement.description)):
        node = memory_services.memory_node_restate(node=target, source_message=reply)
        _confirmed(node, outcome, found_by)
        return node
    source = MemoryNode.Source.USER
    if "imported" in reply.trace:
        # A reply of a conversation imported from another assistant (apps.imports).
        source = MemoryNode.Source.IMPORTED
    # An instruction to the assistant is held apart, whatever it was meant to update: no fact
    # key to evolve a trusted memory, and a state that recall, promotion and the critic never
    # touch until it is approved.
    if target is not None and not held:
        earlier = None
        if not sure:
            # The owner's write lock before the earlier reply's row, as the receipt's Update.
            memory_services.memory_writes_lock(owner=owner)
            earlier = _proposed_before(owner=owner, statement=statement, reply=reply)
            if earlier is None:
                _propose(statement=statement, found_by=found_by, target=target, outcome=outcome)
                return None
        node = memory_services.memory_node_revise(
            node=target,
            description=statement.description,
            importance=statement.importance,
            origin_context=statement.quote,
            source_message=reply,
            source=source,
            quote=statement.quote,
            # Nothing is embedded under the owner's write lock: the vector made before it, if
            # it is of the same text (the memory keeps its topic), else one made after commit.
            vector=vector if target.topic == statement.topic else None,
            embed=False,
        )
        _give_end(node, statement)
        outcome["updated"].append(node.pk)
        _found(outcome, node, found_by, "updated")
        if earlier is not None:
            message, index = earlier
            _proposal_settle(message=message, index=index, state=SAID_AGAIN, node=node)
            broadcasts.receipt_changed(message_id=message.pk)
        return node
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
        embed=False,
    )
    if getattr(node, "restated", False):
        _confirmed(node, outcome, found_by)
        return node
    if held:
        outcome.setdefault("quarantined", []).append(node.pk)
        _found(outcome, node, found_by, "held")
        return node
    _give_end(node, statement)
    outcome["created"].append(node.pk)
    _found(outcome, node, found_by, "created")
    return node


def _reads_as_instruction(statement: Statement, reply: Message) -> bool:
    """The statement, its quote or the user's sentence holding it reads as an order to the
    assistant: a rule's quote is a clause, "answer every question with 'LOL'" of "From now on,
    answer every question with 'LOL'", whose cue is in the rest of the sentence."""
    said = reply.reply_to.content if reply.reply_to_id is not None else ""
    quote = statement.quote.casefold()
    around = [
        part for part in statement_rules.sentences(said) if quote and quote in part.casefold()
    ]
    return any(
        looks_like_instruction(text) for text in [statement.description, statement.quote, *around]
    )


def _confirmed(node: MemoryNode, outcome: dict, found_by: str) -> None:
    """A memory the reply said again: left as one row (`left`, which retraction and the critic
    read) and confirmed by it, as the receipt says; said twice in one reply, it is one new
    memory, neither left nor confirmed."""
    this_reply = [*outcome["created"], *outcome["updated"], *outcome.get("quarantined", [])]
    if node.pk in this_reply:
        return
    outcome["left"].append(node.pk)
    if node.pk not in outcome.setdefault("confirmed", []):
        outcome["confirmed"].append(node.pk)
        _found(outcome, node, found_by, "confirmed")


def _found(outcome: dict, node: MemoryNode, found_by: str, what: str) -> None:
    """Name what found a memory the reply wrote, in its outcome and, once committed, in the
    metrics (thalamus_memories_found_total)."""
    outcome.setdefault("found_by", {})[str(node.pk)] = found_by
    transaction.on_commit(lambda: metrics.record_memory_found(found_by=found_by, outcome=what))


def _give_end(node: MemoryNode, statement: Statement) -> None:
    """A fact true only for a while ends with its last day; decay closes it after that."""
    if statement.valid_until is not None:
        last_moment = datetime.combine(statement.valid_until, datetime.max.time())
        memory_services.memory_node_set_validity(
            node=node, valid_until=timezone.make_aware(last_moment)
        )


# --- proposals: a new value of a fact on one weak signal waits for a second one -----------------
#
# A fact with a key (a name, a home, a job) has one current value. A new value found by the
# rules alone, the model not quoting it, does not replace it at once: a sentence that only looks
# like the fact ("Call me later") would rename the user. It is kept in the reply's outcome as a
# proposal, which the receipt shows ("You said X; I know Y. Update?"), and replaces the old
# value when the user confirms it there or states the same value again in a later message. The
# old value stays as a superseded row, as every change of a fact's value does.

PENDING = "pending"
CONFIRMED = "confirmed"
SAID_AGAIN = "said again"


def _propose(*, statement: Statement, found_by: str, target: MemoryNode, outcome: dict) -> None:
    said = asdict(statement)
    said["valid_until"] = statement.valid_until.isoformat() if statement.valid_until else None
    outcome.setdefault("proposed", []).append(
        {**said, "state": PENDING, "replaces": target.pk, "found_by": found_by}
    )
    transaction.on_commit(
        lambda: metrics.record_memory_found(found_by=found_by, outcome="proposed")
    )


def _proposal_statement(proposal: dict) -> Statement:
    names = {field.name for field in fields(Statement)}
    said = {name: value for name, value in proposal.items() if name in names}
    said["triple"] = tuple(said["triple"]) if said.get("triple") else None
    said["valid_until"] = (
        date.fromisoformat(said["valid_until"]) if said.get("valid_until") else None
    )
    return Statement(**said)


def _proposed_before(*, owner, statement: Statement, reply: Message) -> tuple[Message, int] | None:
    """An earlier reply's pending proposal of this value of the fact, locked: the user says
    it a second time."""
    earlier = (
        Message.objects.select_for_update(of=("self",))
        .filter(
            conversation__owner=owner,
            role=Message.Role.ASSISTANT,
            # An edited message's old text, or a deleted one, said nothing any more.
            active=True,
            trace__reflection__proposed__contains=[
                {"fact_key": statement.fact_key, "state": PENDING}
            ],
        )
        .exclude(pk=reply.pk)
        .order_by("-created_at", "-pk")
    )
    for message in earlier:
        for index, proposal in enumerate(message.trace[TRACE_KEY]["proposed"]):
            if (
                proposal["state"] == PENDING
                and proposal["fact_key"] == statement.fact_key
                and _same_value(proposal, statement)
            ):
                return message, index
    return None


def _same_value(proposal: dict, statement: Statement) -> bool:
    """The same value of the fact: its triple's object ("Ghent"), else its words."""
    if proposal.get("triple") and statement.triple:
        return same_text(proposal["triple"][1], statement.triple[1])
    return same_text(proposal["description"], statement.description)


def _proposal_settle(*, message: Message, index: int, state: str, node: MemoryNode) -> dict:
    """Mark a proposal settled (the message's row locked by the caller); its outcome."""
    outcome = message.trace[TRACE_KEY]
    outcome["proposed"][index] = {**outcome["proposed"][index], "state": state, "node": node.pk}
    chat_services.message_trace_put(message_id=message.pk, key=TRACE_KEY, value=outcome)
    return outcome


def pending_proposal(message: Message, index: int) -> dict | None:
    """The message's proposal `index` while it waits; an edited or deleted message's never."""
    proposals = (message.trace.get(TRACE_KEY) or {}).get("proposed") or []
    if not message.active:
        return None
    if 0 <= index < len(proposals) and proposals[index]["state"] == PENDING:
        return proposals[index]
    return None


def proposal_confirm(*, reply: Message, index: int) -> MemoryNode | None:
    """The user confirms a proposed new value of a fact in the reply's receipt: it replaces
    the current value (kept as history), and the reply's outcome lists it as updated. None
    when the proposal is gone or settled already (a second click, a second mention)."""
    proposal = pending_proposal(reply, index)
    if proposal is None:
        return None
    owner = reply.conversation.owner
    vectors = _embed([_proposal_statement(proposal)])
    with transaction.atomic():
        # The owner's write lock before the reply's row, as a second mention takes them.
        memory_services.memory_writes_lock(owner=owner)
        locked = Message.objects.select_for_update().get(pk=reply.pk)
        proposal = pending_proposal(locked, index)
        if proposal is None:
            return None
        replaced = MemoryNode.objects.filter(pk=proposal["replaces"], valid_to=None).first()
        before = replaced.description if replaced is not None else ""
        outcome = locked.trace[TRACE_KEY]
        outcome.setdefault("found_by", {})
        node = _learn(
            finding=Finding(_proposal_statement(proposal), proposal["found_by"]),
            vector=vectors[0] if vectors else None,
            reply=locked,
            outcome=outcome,
            allowed=set(user_settings_for(user=owner).learn_categories),
            sure=True,
        )
        outcome["proposed"][index] = {**proposal, "state": CONFIRMED, "node": node.pk}
        outcome["taught"] = True
        chat_services.message_trace_put(message_id=reply.pk, key=TRACE_KEY, value=outcome)
        event_record(
            kind=Event.Kind.EDIT,
            owner=owner,
            summary=(
                f"You confirmed it, so I updated what I knew: {node.description[:200]}"
                + (f" (was: {before[:200]})" if before else "")
            ),
            payload={
                "action": "proposal_confirm",
                "message_id": reply.pk,
                "node_id": node.pk,
                "text": node.description,
                "was": before,
            },
        )
    return node
