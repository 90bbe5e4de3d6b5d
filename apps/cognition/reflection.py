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

from dataclasses import replace
from datetime import date
from zoneinfo import ZoneInfo

from django.db import transaction
from django.utils import timezone

from apps.accounts.selectors import memory_enabled_for, user_time_zone
from apps.chat import services as chat_services
from apps.chat.models import Message
from apps.cognition import statements as statement_rules
from apps.cognition.remembering import (
    FOUND_BY_BOTH,
    FOUND_BY_MODEL,
    FOUND_BY_RULES,
    TRACE_KEY,
    Finding,
    remember_all,
)
from apps.cognition.schemas import (
    message_key,
    quote_max_chars,
    stated_quotes_max_tokens,
    stated_quotes_schema,
)
from apps.cognition.statements import Statement
from apps.cognition.statements.corrections import opens_taking_back, without_taken_back
from apps.cognition.stream_words import error_record
from apps.core.llm.fitting import bodies, template_prompt
from apps.core.llm.outcomes import InvalidReply, Refused, TooLong
from apps.core.llm.structured import complete_as
from apps.core.selectors import runtime_config
from apps.language.facts import language_of
from apps.memory.models import MemoryNode
from apps.memory.provenance import (
    as_written,
    conversation_marker,
    datamark,
    is_data,
    marker_system,
)

NOTHING_YET = "(nothing yet)"
# Measured with SmolLM2-135M (tests/real_llm/test_real_reflection.py): greedy decoding copies
# the user's words most faithfully.
EXTRACTION_TEMPERATURE = 0.0


def as_shown(message: Message, marker: str) -> str:
    """A message's text in a background prompt: one imported from another assistant is data,
    datamarked with `marker` (apps.memory.provenance)."""
    return datamark(message.content, marker) if "imported" in message.trace else message.content


def exchange_lines(reply: Message, marker: str = "") -> list[str]:
    lines = []
    if reply.reply_to_id is not None:
        lines.append(f"user: {as_shown(reply.reply_to, marker)}")
    lines.append(f"assistant: {as_shown(reply, marker)}")
    return lines


def node_line(node: MemoryNode, marker: str = "") -> str:
    """A memory as a background prompt shows it; with a `marker`, its words datamarked if its
    source makes it data."""
    description = node.description
    if marker and is_data(node.source):
        description = datamark(description, marker)
    return (
        f"[{node.pk}] {node.kind}, topic {node.topic or '-'}, key {node.fact_key or '-'}: "
        f"{description}"
    )


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
    # The user's messages of a conversation imported from another assistant are data.
    data = ["imported" in reply.trace for reply in replies]
    marker = conversation_marker(conversation.pk)
    try:
        quotes = (
            extracted_quotes(said, data=data, marker=marker)
            if any(text.strip() for text in said)
            else {}
        )
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
        outcome = remember_all(
            reply=reply,
            found=found[index],
            rejected=rejected[index],
            stated=bool(found[index]) or statement_rules.states_something(said[index]),
            failure=failure,
        )
        if outcome is not None:
            outcomes[reply.pk] = outcome
    return outcomes or None


def extracted_quotes(
    said: list[str], *, data: list[bool] | None = None, marker: str = ""
) -> dict[int, list[str]]:
    """The model's quotes of what the user stated, by the index of the message it put them
    under. Only the user's messages are in the prompt: nothing can come from the assistant.
    Those `data` says are data are shown datamarked with `marker`, which a system message
    explains, and a quote of them is read as written.
    """
    quote_chars = quote_max_chars(said)
    schema = stated_quotes_schema(len(said), quote_chars)
    data = data or [False] * len(said)
    lines = [
        f"{message_key(index)}: {datamark(text, marker) if data[index] else text}"
        for index, text in enumerate(said)
    ]
    prompt = template_prompt(
        "extract", slots={"messages": bodies(lines)}, system=marker_system(marker, lines)
    )
    reply = complete_as(
        schema,
        role="reflection",
        prompt=prompt,
        # Room for the longest reply the schema allows: a reply cut inside a quote (256 tokens
        # were, when SmolLM2-135M repeated a phrase through six messages' quotes) is lost whole.
        max_tokens=stated_quotes_max_tokens(len(said), quote_chars),
        temperature=EXTRACTION_TEMPERATURE,
    )
    return {
        index: [as_written(quote, marker) for quote in getattr(reply, message_key(index))]
        for index in range(len(said))
    }


def grounded_statements(
    *, quotes: dict[int, list[str]], said: list[str], today: date
) -> tuple[list[list[Finding]], list[list[dict]]]:
    """Per message: the statements its quoted sentences make and those a rule places in any
    of its sentences (each once, with what found it: the model's quote, the rules or both),
    and the quotes found in no message, rejected under the message the model put them under.

    A quote's own words decide whose message it is, whatever key it came under: a small model
    often shifts them by one.
    """
    found: list[dict[str, Finding]] = [{} for _ in said]
    rejected: list[list[dict]] = [[] for _ in said]

    def add(owner_index: int, statement: Statement, by: str) -> None:
        key = " ".join(statement.description.casefold().split())
        earlier = found[owner_index].get(key)
        if earlier is None:
            found[owner_index][key] = Finding(statement, by)
        elif earlier.found_by != by:
            found[owner_index][key] = Finding(earlier.statement, FOUND_BY_BOTH)

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
                    add(owner_index, statement, FOUND_BY_MODEL)
    # What a rule places is the user's statement whether or not the model quoted it: a small
    # model lists some of a message's statements and not others (SmolLM2-135M left out "I work
    # as a carpenter" in one real run of two, "I prefer short answers" in the other).
    for owner_index, text in enumerate(said):
        for sentence in statement_rules.sentences(text):
            for statement in statement_rules.ruled_statements(sentence, today=today):
                add(owner_index, statement, FOUND_BY_RULES)
    return [_kept(findings, said[index], today) for index, findings in enumerate(found)], rejected


def _kept(findings: dict[str, Finding], text: str, today: date) -> list[Finding]:
    """A message's findings less the single values it takes back ("… software tester. wait no,
    QA lead"), however they were found; a bare value after the turn is the rules' finding."""
    statements = [finding.statement for finding in findings.values()]
    language = language_of(text)
    kept = without_taken_back(text, statements, today=today, language=language)
    by = {id(finding.statement): finding for finding in findings.values()}
    corrects = opens_taking_back(text, language=language)
    return [
        replace(by.get(id(s)) or Finding(s, FOUND_BY_RULES), corrects=corrects and bool(s.fact_key))
        for s in kept
    ]


def user_zone(user) -> ZoneInfo:
    return ZoneInfo(user_time_zone(user=user))
