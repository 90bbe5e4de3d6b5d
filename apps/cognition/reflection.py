"""Reflection: after completed replies, one small LLM call finds what the user stated.

The only place memories are formed from conversation. The model is asked one focused thing,
bounded so that a 135M model finishes it: which words of the user's messages (never the
assistant's) state something about the user. Each quote must be found in one of those messages;
the sentence holding it becomes the memory, typed by rules (apps.cognition.statements), with a
triple where a rule knows one. A quote found in none of them is rejected: the model was asked
for nothing but quotes, so a quote nobody wrote is an invention, not an inference worth a
memory. The retrieval plan and the world state's topics are no longer asked for here; both
stay as they were.

A reply is reflected on at most once: the claim (a key in the reply's trace, set by a
conditional UPDATE) commits in the same transaction as that reply's writes, so a task killed
before the commit leaves nothing behind and a redelivered or duplicated task finds the claim
and writes nothing.
"""

from __future__ import annotations

import logging
from datetime import date, datetime
from zoneinfo import ZoneInfo

from django.db import transaction
from django.utils import timezone

from apps.accounts.selectors import memory_enabled_for, user_settings_for, user_time_zone
from apps.chat import broadcasts
from apps.chat import services as chat_services
from apps.chat.models import Message
from apps.cognition import statements as statement_rules
from apps.cognition.schemas import (
    message_key,
    quote_max_chars,
    stated_quotes_max_tokens,
    stated_quotes_schema,
)
from apps.cognition.statements import Statement
from apps.core.llm.fitting import bodies, template_prompt
from apps.core.llm.outcomes import InvalidReply, Refused, TooLong
from apps.core.llm.structured import complete_as
from apps.core.models import Event
from apps.core.selectors import runtime_config
from apps.core.services import event_record
from apps.memory import services as memory_services
from apps.memory.embedding import EmbeddingError, get_embedder
from apps.memory.models import MemoryNode
from apps.memory.quarantine import looks_like_instruction
from apps.memory.schemas import same_text

logger = logging.getLogger(__name__)

TRACE_KEY = "reflection"
NOTHING_YET = "(nothing yet)"
STARTING_CONFIDENCE = 1
# How a withheld fact of no category is counted in the outcome's "withheld" categories.
UNCLASSIFIED = "unclassified"
# Measured with SmolLM2-135M (tests/real_llm/test_real_reflection.py): greedy decoding copies
# the user's words most faithfully.
EXTRACTION_TEMPERATURE = 0.0


def exchange_lines(reply: Message) -> list[str]:
    lines = []
    if reply.reply_to_id is not None:
        lines.append(f"user: {reply.reply_to.content}")
    lines.append(f"assistant: {reply.content}")
    return lines


def node_line(node: MemoryNode) -> str:
    return (
        f"[{node.pk}] {node.kind}, topic {node.topic or '-'}, key {node.fact_key or '-'}: "
        f"{node.description}"
    )


def _embed(texts: list[str]) -> list[list[float]] | None:
    try:
        return get_embedder().embed(texts)
    except EmbeddingError as exc:
        logger.warning("reflection without vectors: %s", exc)
        return None


def _reflectable():
    # On the branch shown: an edited message's old text, or a deleted one, teaches nothing.
    return Message.objects.select_related("conversation__owner", "reply_to").filter(
        role=Message.Role.ASSISTANT, status=Message.Status.COMPLETE, active=True
    )


def reflectable_reply(message_id: int) -> Message | None:
    return _reflectable().filter(pk=message_id).first()


def unreflected_replies(*, conversation_id: int, limit: int) -> list[int]:
    """The complete replies of a conversation not yet reflected on, oldest first."""
    return list(
        Message.objects.filter(
            conversation_id=conversation_id,
            role=Message.Role.ASSISTANT,
            status=Message.Status.COMPLETE,
            active=True,
        )
        .exclude(trace__has_key=TRACE_KEY)
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)[:limit]
    )


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


def user_said(reply: Message) -> str:
    return reply.reply_to.content if reply.reply_to_id is not None else ""


def reflection_fail(*, reply: Message, error: str, attempts: int) -> bool:
    """Mark the reply's reflection failed for good, once, and say so in an error event."""
    outcome = {
        "error": error[:500],
        "failed": True,
        "attempts": attempts,
        "stated": statement_rules.states_something(user_said(reply)),
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
    """Reflect on one completed reply; the outcome stored in its trace, or None if skipped."""
    outcomes = reflect_on_replies(
        reply_ids=[message_id], attempts=attempts, last_attempt=last_attempt
    )
    return (outcomes or {}).get(message_id)


def reflect_on_replies(
    *, reply_ids: list[int], attempts: int = 1, last_attempt: bool = True
) -> dict | None:
    """Reflect in one LLM call on completed replies of one conversation (on their users'
    messages); {reply id: its outcome, stored in its trace} for those reflected on now, or
    None when none was (switched off, memory off, temporary chat, all claimed already).

    An unusable reply from the model raises InvalidReply for the task to try again, unless
    this is the `last_attempt`: then, as on a refusal or a prompt too long, the replies learn
    only what the rules place (`_remember_without_model`).
    """
    if not runtime_config().reflection_enabled:
        return None
    replies = _unclaimed(reply_ids)
    if not replies:
        return None
    conversation = replies[0].conversation
    if any(reply.conversation_id != conversation.pk for reply in replies):
        raise ValueError("reflect_on_replies takes the replies of one conversation")
    owner = conversation.owner
    # A temporary chat, or a user who turned memory off, teaches the memory nothing.
    if conversation.temporary or not memory_enabled_for(user_id=owner.pk):
        return None
    said = [user_said(reply) for reply in replies]
    try:
        quotes = extracted_quotes(said) if any(text.strip() for text in said) else {}
    except InvalidReply as exc:
        if not last_attempt:
            raise
        return _remember_without_model(replies, error=str(exc), attempts=attempts)
    except (Refused, TooLong) as exc:
        return _remember_without_model(replies, error=str(exc), attempts=attempts)
    return _remember_replies(replies, said=said, quotes=quotes)


def reflect_without_model(*, reply_ids: list[int], error: str, attempts: int) -> dict | None:
    """The model could not be asked (it stayed down through every retry): what the rules
    place in the replies' user messages is still learnt, and the rest marked failed."""
    replies = _unclaimed(reply_ids)
    if not replies:
        return None
    conversation = replies[0].conversation
    if conversation.temporary or not memory_enabled_for(user_id=conversation.owner_id):
        for reply in replies:
            reflection_fail(reply=reply, error=error, attempts=attempts)
        return None
    return _remember_without_model(replies, error=error, attempts=attempts)


def _unclaimed(reply_ids: list[int]) -> list[Message]:
    """The reflectable replies among these that no reflection has claimed, oldest first."""
    return [
        reply
        for reply in _reflectable().filter(pk__in=reply_ids).order_by("created_at", "pk")
        if TRACE_KEY not in reply.trace
    ]


def _remember_without_model(replies: list[Message], *, error: str, attempts: int) -> dict | None:
    """Without the model's quotes: each reply whose user message holds a statement a rule
    places ("I have a cat named Miso") learns it, with the model's failure in its outcome and
    an error event; one with none is marked failed, as before."""
    return _remember_replies(
        replies,
        said=[user_said(reply) for reply in replies],
        quotes={},
        failure={"error": error, "attempts": attempts},
    )


def _remember_replies(
    replies: list[Message], *, said: list[str], quotes: dict, failure: dict | None = None
) -> dict | None:
    today = timezone.localdate(timezone=user_zone(replies[0].conversation.owner))
    found, rejected = grounded_statements(quotes=quotes, said=said, today=today)
    outcomes = {}
    for index, reply in enumerate(replies):
        if failure is not None and not found[index]:
            reflection_fail(reply=reply, error=failure["error"], attempts=failure["attempts"])
            continue
        outcome = _remember_all(
            reply=reply,
            found=found[index],
            rejected=rejected[index],
            stated=bool(found[index]) or statement_rules.states_something(said[index]),
            failure=failure,
        )
        if outcome is not None:
            outcomes[reply.pk] = outcome
    return outcomes or None


def extracted_quotes(said: list[str]) -> dict[int, list[str]]:
    """The model's quotes of what the user stated, by the index of the message it put them
    under. Only the user's messages are in the prompt: nothing can come from the assistant."""
    quote_chars = quote_max_chars(said)
    schema = stated_quotes_schema(len(said), quote_chars)
    lines = [f"{message_key(index)}: {text}" for index, text in enumerate(said)]
    prompt = template_prompt("extract", slots={"messages": bodies(lines)})
    reply = complete_as(
        schema,
        role="reflection",
        prompt=prompt,
        # Room for the longest reply the schema allows: a reply cut inside a quote (256 tokens
        # were, when SmolLM2-135M repeated a phrase through six messages' quotes) is lost whole.
        max_tokens=stated_quotes_max_tokens(len(said), quote_chars),
        temperature=EXTRACTION_TEMPERATURE,
    )
    return {index: getattr(reply, message_key(index)) for index in range(len(said))}


def grounded_statements(
    *, quotes: dict[int, list[str]], said: list[str], today: date
) -> tuple[list[list[Statement]], list[list[dict]]]:
    """Per message: the statements its quoted sentences make and those a rule places in any
    of its sentences (each once), and the quotes found in no message, rejected under the
    message the model put them under.

    A quote's own words decide whose message it is, whatever key it came under: a small model
    often shifts them by one.
    """
    found: list[list[Statement]] = [[] for _ in said]
    rejected: list[list[dict]] = [[] for _ in said]
    seen: set[tuple[int, str]] = set()

    def add(owner_index: int, statement: Statement) -> None:
        key = (owner_index, " ".join(statement.description.casefold().split()))
        if key not in seen:
            seen.add(key)
            found[owner_index].append(statement)

    for index, texts in quotes.items():
        for quote in texts:
            located = [
                (owner_index, sentence)
                for owner_index, text in enumerate(said)
                for sentence in statement_rules.quoted_sentences(quote=quote, text=text)
            ]
            if not located:
                if quote.strip():
                    rejected[index].append(
                        {"text": quote[:200], "reason": "not in the user's messages"}
                    )
                continue
            for owner_index, sentence in located:
                for statement in statement_rules.statements_of(sentence, today=today, quote=quote):
                    add(owner_index, statement)
    # What a rule places is the user's statement whether or not the model quoted it: a small
    # model lists some of a message's statements and not others (SmolLM2-135M left out "I work
    # as a carpenter" in one real run of two, "I prefer short answers" in the other).
    for owner_index, text in enumerate(said):
        for sentence in statement_rules.sentences(text):
            for statement in statement_rules.ruled_statements(sentence, today=today):
                add(owner_index, statement)
    return found, rejected


def _remember_all(
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


def user_zone(user) -> ZoneInfo:
    return ZoneInfo(user_time_zone(user=user))


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
