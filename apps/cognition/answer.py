"""The hot path of a turn: build the prompt, stream the answer, record how it went.

The answer call never writes memory; background reflection does that after the reply is saved.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future
from contextlib import aclosing
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.utils import timezone

from apps.accounts.selectors import custom_instructions, time_zone_of, user_settings_for
from apps.chat import services as chat_services
from apps.chat.models import Message
from apps.chat.selectors import history_before
from apps.cognition.context import MemoryContext
from apps.cognition.debate import (
    DraftReview,
    debate_record,
    review_draft,
    rewrite_messages,
    rule_lines,
)
from apps.cognition.runaway import clean_title, repeated_tail
from apps.core.llm import gateway
from apps.core.llm.fitting import (
    Piece,
    PromptBuilder,
    Room,
    bodies,
    fit,
    message_piece,
    template_prompt,
)
from apps.core.llm.gateway import Answering, Part, Usage
from apps.core.llm.limits import (
    CHAT,
    TITLE,
    TITLE_MAX_TOKENS,
    ModelLimits,
    TokenCounter,
    prompt_and_limits,
)
from apps.core.llm.outcomes import LLMError, TimedOut, TooLong, Unreachable
from apps.core.llm.servers import Endpoint
from apps.core.models import RuntimeConfig
from apps.core.prompts import fill_prompt
from apps.core.selectors import runtime_config
from apps.memory.renderer import episode_line, knowledge_line, memory_line, render_memory_block

logger = logging.getLogger(__name__)

NOTHING_REMEMBERED = "(nothing yet)"


class AnswerFailed(Exception):
    """The LLM could not produce the answer; the message says why in one sentence."""


class _StreamCutOff(Exception):
    pass


@dataclass
class PreparedTurn:
    reply: Message
    model: str
    temperature: float
    base_url: str
    messages: list[dict]
    # What the messages were fitted to; `rebuild` fits them to another model's room (a
    # fallback's, or the model an API client chose).
    room: Room
    rebuild: Callable[[Room], PreparedTurn] | None = None
    # The client's cap on the reply (None: the model's own cap).
    max_tokens: int | None = None
    # An API client's choice of model on the chat's server (None: the chat's chain).
    endpoint: Endpoint | None = None
    # The runtime configuration the turn was prepared with (the chat's chain is read from it).
    config: RuntimeConfig | None = None
    trace: dict = field(default_factory=dict)
    # The internal debate's rules and preferences (their lines); None: no debate this turn.
    debate_rules: list[str] | None = None
    # The turn's steps as the pipeline ran them (pipeline.Spans); the answer adds its own.
    spans: object | None = None
    # Set by an API client for its call; None: the server's default.
    top_p: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    # False: the reply is not reflected on (memory off for an API call).
    remember: bool = True

    def sampling(self) -> dict:
        """The request's sampling fields besides the temperature, as the client set them."""
        fields = {"top_p": self.top_p, "stop": self.stop, "seed": self.seed}
        return {name: value for name, value in fields.items() if value is not None}


@dataclass
class MemoryForTurn:
    """What a turn needs besides its history: what memory holds, the model's limits, the
    system prompt's template."""

    context: MemoryContext
    ms: float
    template: str
    user_name: str
    limits: ModelLimits
    counter: TokenCounter
    config: RuntimeConfig
    # The lines of the rules and preferences the internal debate holds the draft to; None when
    # the debate is off.
    rules: list[str] | None = None
    # The user's world state (topics, project, goals, how to answer), rendered; "" when empty.
    world: str = ""
    # The user's settings: their custom instructions (never dropped), their time zone, and
    # whether memory was read at all (off, or a temporary chat: nothing read, nothing learnt).
    instructions: str = ""
    time_zone: str = ""
    remember: bool = True


def memory_for_turn(
    *,
    user,
    conversation,
    text: str,
    config: RuntimeConfig | None = None,
    embedded: Future | None = None,
    recall: bool = True,
) -> MemoryForTurn:
    """What the memory knows for this turn; callers may run it while the message is saved.

    `embedded`: the embedding of `text` already under way (`start_turn_embedding`). Without
    `recall` (memory off for an API call) the memory, the rules and the world state stay empty.
    """
    from apps.cognition.context import memory_context_for_turn
    from apps.memory.renderer import render_world
    from apps.memory.selectors import rules_and_preferences_for, world_state_for

    started = time.perf_counter()
    config = config or runtime_config()
    # Read before the recall, which spends most of its time waiting on the embedding, rather
    # than after it, when the answer waits on this.
    template, limits, counter = prompt_and_limits("answer", CHAT, config)
    prefs = user_settings_for(user=user)
    language = prefs.knowledge_language or config.renderer_language
    own = {
        "instructions": custom_instructions(prefs),
        "time_zone": time_zone_of(prefs),
        "remember": prefs.memory_enabled and not getattr(conversation, "temporary", False),
    }
    if not recall or not own["remember"]:
        return MemoryForTurn(
            context=MemoryContext(
                trace={"memories": [], "episodes": [], "triples": [], "off": True},
                language=language,
                user=user,
            ),
            **{**own, "remember": False},
            ms=(time.perf_counter() - started) * 1000,
            template=template,
            user_name=user.get_full_name() or user.get_username(),
            limits=limits,
            counter=counter,
            config=config,
        )
    context = memory_context_for_turn(
        user=user, conversation=conversation, text=text, config=config, embedded=embedded
    )
    context.language = language
    rules = None
    if config.debate_enabled:
        descriptions = rules_and_preferences_for(user_id=user.pk).values_list(
            "description", flat=True
        )
        rules = rule_lines(list(descriptions))
    world = render_world(world_state_for(user_id=user.pk), language=language)
    return MemoryForTurn(
        context=context,
        ms=(time.perf_counter() - started) * 1000,
        template=template,
        user_name=user.get_full_name() or user.get_username(),
        limits=limits,
        counter=counter,
        config=config,
        rules=rules,
        world=world,
        **own,
    )


# Asked, not saved, after an answer cut short (Continue).
CONTINUE = (
    "Your answer above was cut off. Continue it exactly where it stopped, without repeating "
    "anything you already wrote and without any preamble."
)


class MessageTooLong(TooLong):
    """The user's message does not fit the model's window even on its own."""


# How long each part of the answer's prompt is kept when the window is too small (higher stays
# longer): older history, then knowledge by relevance, then memories and episodes by score, then
# who the user is (identity), then the last exchange; the system prompt and the message never go.
KEEP_KNOWLEDGE = 100
KEEP_MEMORY = 1000
KEEP_IDENTITY = 5000
KEEP_LAST_EXCHANGE = 10_000
# What the tools looked up for this very message outlasts what recall found.
KEEP_EVIDENCE = 3000
# A placeholder that always goes first (no world state to show).
NEVER_KEPT = -1


def _knowledge_keep(triples: list, text: str) -> list[float]:
    """How long each triple stays: identity longest, the others by words shared with the turn."""
    words = {word.casefold() for word in text.split() if len(word) > 2}
    keep = []
    for triple in triples:
        if triple.category == "identity":
            keep.append(KEEP_IDENTITY)
            continue
        said = f"{triple.subject} {triple.predicate.name} {triple.object}".replace("_", " ")
        keep.append(KEEP_KNOWLEDGE + sum(1 for word in said.split() if word.casefold() in words))
    return keep


def evidence_line(item) -> str:
    """One piece of evidence the tools found, for the system prompt."""
    when = f" ({item.at:%Y-%m-%d})" if getattr(item, "at", None) else ""
    return f"- [{item.tool}] {item.text}{when}"


EVIDENCE_HEADING = "Looked up for this message:"


def build_turn(
    *,
    reply: Message,
    history: list[Message],
    memory: MemoryForTurn,
    continue_from: str = "",
    evidence: list | tuple = (),
    client_system: str = "",
    room: Room | None = None,
) -> PreparedTurn:
    """The request for the LLM from parts already read; no database access.

    With `continue_from` (an answer cut short, its text so far), the request ends with that
    answer and the instruction to write on from where it stops.

    Everything is fitted to the model's window minus the answer's cap, by the one budgeting
    function: first the oldest history goes (the last exchange is kept longest), then the least
    relevant knowledge, then the lowest-scored memories and episodes. The user's message itself
    is never cut; one that cannot fit on its own raises MessageTooLong. `client_system` (an API
    client's own system prompt) leads the system prompt, ahead of the memory block, and is never
    dropped either. The world state is kept
    as long as identity; what the tools found (`evidence`, best first) outlasts memories.
    `room`: another model's room than the chat's (`memory.limits`).
    """
    started = time.perf_counter()
    config = memory.config
    context = memory.context
    room = room or Room(memory.limits, memory.counter)
    limits = room.limits
    question, earlier = (history[-1], history[:-1]) if history else (None, [])
    system_frame = fill_prompt(
        "answer",
        memory.template,
        date=_today(memory),
        user_name=memory.user_name,
        memory=NOTHING_REMEMBERED,
    )
    if memory.instructions:
        system_frame = f"{system_frame}\n\n{memory.instructions}"
    knowledge_keep = _knowledge_keep(context.knowledge, question.content if question else "")
    if client_system:
        system_frame = f"{client_system}\n\n{system_frame}"
    pieces = [message_piece(system_frame)]
    pieces += [
        Piece(
            knowledge_line(triple=triple, language=context.language, user=context.user),
            keep,
        )
        for triple, keep in zip(context.knowledge, knowledge_keep, strict=True)
    ]
    pieces += [
        Piece(memory_line(hit.description), KEEP_MEMORY + hit.score) for hit in context.memories
    ]
    pieces += [
        Piece(
            episode_line(
                summary=hit.summary,
                ended_at=hit.ended_at,
                lesson=hit.lesson,
                language=context.language,
            ),
            KEEP_MEMORY + hit.score,
        )
        for hit in context.episodes
    ]
    pieces.append(Piece(memory.world, KEEP_IDENTITY) if memory.world else Piece("", NEVER_KEPT))
    pieces += [
        Piece(evidence_line(item), KEEP_EVIDENCE - index) for index, item in enumerate(evidence)
    ]
    last_exchange = len(earlier) - 2
    pieces += [
        message_piece(
            message.content, index + (KEEP_LAST_EXCHANGE if index >= last_exchange else 0)
        )
        for index, message in enumerate(earlier)
    ]
    if question is not None:
        pieces.append(message_piece(question.content))
    if continue_from:
        # Its end is where to write on from; its middle may go.
        pieces += [message_piece(continue_from, shorten=True), message_piece(CONTINUE)]
    try:
        texts = fit(pieces, budget=room.budget, counter=room.counter)
    except TooLong as exc:
        raise MessageTooLong(
            f"Your message is too long for the model: it needs about {exc.needed:,} tokens "
            f"and {limits.model} has room for {exc.budget:,} (a {limits.context:,}-token window "
            f"with {limits.reply_cap:,} kept for the answer). Shorten it, or give the model a "
            "larger context window.",
            needed=exc.needed,
            budget=exc.budget,
        ) from exc
    offset = 1
    kept_triples = [
        t for t, text in zip(context.knowledge, texts[offset:], strict=False) if text is not None
    ]
    offset += len(context.knowledge)
    kept_memories = [
        hit for hit, text in zip(context.memories, texts[offset:], strict=False) if text
    ]
    offset += len(context.memories)
    kept_episodes = [
        hit for hit, text in zip(context.episodes, texts[offset:], strict=False) if text
    ]
    offset += len(context.episodes)
    world = texts[offset] or ""
    offset += 1
    kept_evidence = [text for text in texts[offset : offset + len(evidence)] if text]
    offset += len(evidence)
    kept_history = [message for message, text in zip(earlier, texts[offset:], strict=False) if text]
    if question is not None:
        kept_history.append(question)
    block = render_memory_block(
        knowledge=kept_triples,
        memories=kept_memories,
        episodes=kept_episodes,
        language=context.language,
        user=context.user,
    )
    if kept_evidence:
        block = "\n".join([block, "", EVIDENCE_HEADING, *kept_evidence]).strip()
    if world:
        block = f"{world}\n\n{block}".strip()
    system = fill_prompt(
        "answer",
        memory.template,
        date=_today(memory),
        user_name=memory.user_name,
        memory=block or NOTHING_REMEMBERED,
    )
    if memory.instructions:
        # The user's own words, after the memory block; counted in the frame, never dropped.
        system = f"{system}\n\n{memory.instructions}"
    if client_system:
        system = f"{client_system}\n\n{system}"
    messages = [{"role": "system", "content": system}] + [
        {"role": m.role, "content": m.content} for m in kept_history
    ]
    if continue_from:
        messages += [
            {"role": "assistant", "content": texts[-2]},
            {"role": "user", "content": CONTINUE},
        ]
    memory_trace = dict(context.trace)
    kept_ids = {hit.id for hit in kept_memories}
    kept_episode_ids = {hit.id for hit in kept_episodes}
    kept_triple_ids = {triple.id for triple in kept_triples}
    memory_trace["memories"] = [m for m in memory_trace["memories"] if m["id"] in kept_ids]
    memory_trace["episodes"] = [e for e in memory_trace["episodes"] if e["id"] in kept_episode_ids]
    memory_trace["triples"] = [t for t in memory_trace["triples"] if t["id"] in kept_triple_ids]
    memory_trace["dropped_for_budget"] = {
        "memories": len(context.memories) - len(kept_memories),
        "episodes": len(context.episodes) - len(kept_episodes),
        "triples": len(context.knowledge) - len(kept_triples),
    }
    trace = {
        "memory": memory_trace,
        "history_messages": len(kept_history),
        "history_dropped": len(history) - len(kept_history),
        "prompt_tokens_estimate": room.counter.messages(messages),
        "limits": {
            "context": limits.context,
            "max_tokens": limits.reply_cap,
            "prompt_budget": limits.prompt_budget,
            "source": limits.source,
        },
        "timings_ms": {
            "memory": round(memory.ms, 2),
            "context": round((time.perf_counter() - started) * 1000, 2),
        },
    }
    # A continuation is not debated: its draft would be half an answer, already half shown.
    debate_rules = memory.rules if not continue_from else None
    if debate_rules == []:
        trace["debate"] = {"skipped": "no rules or preferences to hold the draft to"}
        debate_rules = None
    return PreparedTurn(
        reply=reply,
        model=limits.model,
        temperature=config.temperature,
        base_url=limits.base_url,
        messages=messages,
        room=room,
        rebuild=lambda other: build_turn(
            reply=reply,
            history=history,
            memory=memory,
            continue_from=continue_from,
            evidence=evidence,
            client_system=client_system,
            room=other,
        ),
        trace=trace,
        debate_rules=debate_rules,
        config=config,
    )


# What a fit to another model's room changes in the turn's trace.
FITTED_TRACE_KEYS = (
    "memory",
    "history_messages",
    "history_dropped",
    "prompt_tokens_estimate",
    "limits",
)


def turn_prompt(turn: PreparedTurn) -> PromptBuilder:
    """The turn's messages for the gateway: as prepared for the chat's model, fitted again for
    any other (its trace then says what that model's window kept)."""

    def build(room: Room) -> list[dict]:
        if room == turn.room or turn.rebuild is None:
            return turn.messages
        again = turn.rebuild(room)
        turn.messages, turn.room = again.messages, room
        turn.trace.update({key: again.trace[key] for key in FITTED_TRACE_KEYS})
        return again.messages

    return build


def _today(memory: MemoryForTurn) -> str:
    """Today's date where the user is (their time zone), the server's when unknown."""
    if memory.time_zone:
        return timezone.localdate(timezone=ZoneInfo(memory.time_zone)).isoformat()
    return timezone.localdate().isoformat()


def turn_history(*, reply: Message, config: RuntimeConfig | None = None) -> list[Message]:
    return history_before(message=reply, limit=(config or runtime_config()).short_term_window)


def _failure_sentence(exc: Exception, *, base_url: str, streamed: bool) -> str:
    if isinstance(exc, _StreamCutOff):
        return "The answer was cut off before it finished."
    if isinstance(exc, TimedOut):
        return "The language model took too long to answer."
    if isinstance(exc, MessageTooLong):
        return str(exc)
    if isinstance(exc, TooLong):
        return (
            "The conversation did not fit the model's context window, even fitted again to "
            "the window the server reported."
        )
    if isinstance(exc, Unreachable) and exc.status_code is None:
        if streamed:
            return "The answer was cut off before it finished."
        return f"The language model at {base_url} could not be reached."
    if isinstance(exc, LLMError) and exc.status_code is not None:
        return f"The language model returned an error (HTTP {exc.status_code})."
    return "The language model sent something Thalamus could not read."


def _finish(*, turn: PreparedTurn, **outcome) -> Message:
    saved = chat_services.message_finish(
        message=turn.reply, trace=turn.trace, background=False, **outcome
    )
    if "rules" in turn.trace.get("debate", {}):
        debate_record(
            owner=turn.reply.conversation.owner,
            reply_id=turn.reply.pk,
            conversation_id=turn.reply.conversation_id,
            debate=turn.trace["debate"],
        )
    return saved


def _queue_background(*, turn: PreparedTurn, message: Message) -> None:
    from apps.cognition.context import mark_memories_used

    try:
        # Memory off for this call: the conversation still gets its title, but nothing is
        # learnt from the turn and no memory counts as used.
        chat_services.message_queue_background(message=message, learn=turn.remember)
        if turn.remember:
            mark_memories_used(turn.trace.get("memory", {}))
    except Exception:  # noqa: BLE001 — the reply is saved and shown; a broker outage is logged.
        logger.exception("queueing the background work of reply %s failed", message.pk)


def _stream(turn: PreparedTurn, answering: Answering, *, prompt=None, endpoint=None):
    """The answer's parts from the gateway: the turn's prompt, or `prompt` (the rewrite)."""
    return gateway.stream(
        prompt=prompt if prompt is not None else turn_prompt(turn),
        answering=answering,
        temperature=turn.temperature,
        sampling=turn.sampling(),
        max_tokens=turn.max_tokens,
        endpoint=endpoint or turn.endpoint,
        config=turn.config,
    )


async def answer_reply(
    *,
    reply_id: int,
    turn: Awaitable[PreparedTurn],
    on_request: Callable[[], object] | None = None,
    on_saved: Callable[[Message], Awaitable[object]] | None = None,
    on_review: Callable[[], Awaitable[object]] | None = None,
) -> AsyncIterator[str]:
    """Stream the answer for a saved, pending reply, yielding text deltas.

    `turn` is the prepared request (apps.cognition.pipeline prepares it: while the message is
    being saved, or for a saved reply). The outcome is saved
    whatever happens: complete, failed (then AnswerFailed is raised) or cancelled (when the
    consuming task is cancelled; the partial answer is kept). `on_request` is called as the
    request to the LLM goes out: work that can wait for the model's first token goes there.
    `on_saved` is awaited with the reply as saved with its outcome (to show it), before the
    background work the reply starts (reflection, its title) is queued.

    The request goes through the gateway, which walks the chat's fallback chain and fits the
    prompt to each model's window; a reasoning model's thinking is kept in the trace
    (`reasoning`), never in the reply.

    With the internal debate on (RuntimeConfig.debate_enabled) and rules or preferences to hold
    the answer to, the answer is drafted without streaming, reviewed, and rewritten if the
    review finds it breaks one; `on_review` is awaited as the review starts (to say so), and
    the final answer is streamed (the rewrite) or yielded in pieces (the draft).
    """
    started = time.perf_counter()
    try:
        turn = await turn
    except asyncio.CancelledError:
        # Stopped while the turn was prepared: nothing was asked of the LLM.
        await asyncio.shield(
            database_sync_to_async(chat_services.message_cancel_open, thread_sensitive=False)(
                reply_id=reply_id
            )
        )
        raise
    except MessageTooLong as exc:
        failed = await database_sync_to_async(
            chat_services.message_fail_open, thread_sensitive=False
        )(reply_id=reply_id, error=str(exc))
        if on_saved is not None and failed is not None:
            await on_saved(failed)
        raise AnswerFailed(str(exc)) from exc
    # Marking the reply as streaming is not needed for the request: it runs while the LLM
    # thinks about its first token, and is awaited before the outcome is saved.
    streaming = asyncio.ensure_future(
        database_sync_to_async(_start_streaming, thread_sensitive=False)(turn=turn)
    )
    lease = asyncio.ensure_future(_keep_lease(turn))
    kept = turn.reply.content  # a Continue writes on from the text so far
    written = ""
    thinking = ""
    unchecked = 0
    ttft_ms = None
    usage = None
    finished = False
    finish = Message.FinishReason.STOP
    outcome = Message.Status.FAILED
    error = ""
    llm_started = time.perf_counter()
    answering = Answering()
    noted = False
    try:
        if on_request is not None:
            on_request()
        if turn.debate_rules:
            parts = _debated_parts(
                turn=turn, answering=answering, streaming=streaming, on_review=on_review
            )
        else:
            parts = _stream(turn, answering)
        async with aclosing(parts):
            async for part in parts:
                if not noted:
                    noted = True
                    await _note_endpoint(turn, answering, streaming)
                usage = part.usage or usage
                thinking += part.reasoning
                # PostgreSQL refuses a NUL in text: one in the reply would fail the whole answer.
                delta = part.text.replace("\x00", "") if part.text else ""
                if delta:
                    if ttft_ms is None:
                        ttft_ms = (time.perf_counter() - started) * 1000
                        delta = _joint(kept, delta) + delta
                    written += delta
                    yield delta
                    unchecked += len(delta)
                    if unchecked >= LOOP_CHECK_CHARS:
                        unchecked = 0
                        loop_at = repeated_tail(written)
                        if loop_at is not None:
                            # Leaving the stream closes it, which frees the server's slot.
                            written = written[:loop_at]
                            finish = Message.FinishReason.LOOP
                            break
                if part.finish_reason:
                    finished = True
                    if part.finish_reason == "length":
                        finish = Message.FinishReason.LENGTH
        if not finished and finish != Message.FinishReason.LOOP:
            raise _StreamCutOff("the stream ended without a finish reason")
        outcome = Message.Status.COMPLETE
    except (LLMError, _StreamCutOff) as exc:
        if finished and type(exc) is Unreachable and exc.status_code is None:
            # The finish reason arrived; only the closing "[DONE]" was lost with the connection.
            outcome = Message.Status.COMPLETE
        else:
            error = _failure_sentence(exc, base_url=turn.base_url, streamed=bool(written))
            turn.trace["error_detail"] = f"{type(exc).__name__}: {exc}"[:500]
            if len(answering.fallback_from) > 1 and not noted:
                failed = answering.fallback_from
                turn.trace["answered_by"] = {"model": None, "fallback_from": failed}
    except BaseException:
        # Cancelled (Stop, or the server shutting down): keep what arrived.
        outcome = Message.Status.CANCELLED
        raise
    finally:
        lease.cancel()
        now = time.perf_counter()
        turn.trace["timings_ms"]["llm"] = round((now - llm_started) * 1000, 2)
        turn.trace["timings_ms"]["total"] = round((now - started) * 1000, 2)
        if thinking:
            turn.trace["reasoning"] = thinking.replace("\x00", "")
        if turn.spans is not None:
            turn.spans.record(
                "answer",
                since=llm_started,
                outcome="error" if outcome == Message.Status.FAILED else "ok",
                error=error,
                detail=turn.model,
            )
            turn.trace["spans"] = turn.spans.as_trace()
        completion_tokens = usage.completion_tokens if usage else None
        if kept and completion_tokens is not None and turn.reply.completion_tokens:
            completion_tokens += turn.reply.completion_tokens
        # The streaming mark must land first, or it would overwrite the outcome.
        await asyncio.gather(streaming, return_exceptions=True)
        saved = await database_sync_to_async(_finish, thread_sensitive=False)(
            turn=turn,
            status=outcome,
            content=kept + written,
            error=error,
            finish_reason=finish if outcome == Message.Status.COMPLETE else "",
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=completion_tokens,
            ttft_ms=ttft_ms,
            latency_ms=(now - started) * 1000,
        )
        try:
            if on_saved is not None:
                await on_saved(saved)
        finally:
            # Even when a Stop lands while the finished reply is being shown.
            await asyncio.shield(
                database_sync_to_async(_queue_background, thread_sensitive=False)(
                    turn=turn, message=saved
                )
            )
    if outcome == Message.Status.FAILED:
        raise AnswerFailed(error)


# How much new text arrives between two looks for a loop at the end of the answer.
LOOP_CHECK_CHARS = 64


async def _note_endpoint(turn: PreparedTurn, answering: Answering, streaming) -> None:
    """The answer's first part came: from a fallback, the reply records its model and the trace
    what failed before it."""
    endpoint = answering.endpoint
    if (endpoint.model, endpoint.base_url) == (turn.model, turn.base_url):
        return
    turn.model, turn.base_url = endpoint.model, endpoint.base_url
    if answering.fallback_from:
        turn.trace["answered_by"] = {
            "model": endpoint.model,
            "base_url": endpoint.base_url,
            "fallback_from": answering.fallback_from,
        }
    # The reply was marked as streaming with the chat's own model.
    await asyncio.wait([streaming])
    await database_sync_to_async(_start_streaming, thread_sensitive=False)(turn=turn)


# The approved draft goes to the page in pieces of about this many characters.
DRAFT_PIECE_CHARS = 48


async def _draft_parts(draft: gateway.Reply):
    for start in range(0, len(draft.content), DRAFT_PIECE_CHARS):
        yield Part(text=draft.content[start : start + DRAFT_PIECE_CHARS])
        await asyncio.sleep(0)  # a Stop lands between pieces
    yield Part(
        reasoning=draft.reasoning,
        finish_reason=draft.finish_reason or "stop",
        usage=Usage(draft.prompt_tokens, draft.completion_tokens),
    )


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


async def _debated_parts(
    *,
    turn: PreparedTurn,
    answering: Answering,
    streaming: asyncio.Future,
    on_review: Callable[[], Awaitable[object]] | None,
) -> AsyncIterator[Part]:
    """The internal debate (CLAM §4): draft, antagonistic review, rewrite if a rule is broken.

    A review that fails (an HTTP error, JSON that never validates) lets the draft through, with
    the error in the trace: the draft is a finished answer, and the review only a check of it.
    """
    debate = turn.trace["debate"] = {"rules": len(turn.debate_rules), "timings_ms": {}}
    timings = debate["timings_ms"]
    try:
        started = time.perf_counter()
        draft = await gateway.collect(_stream(turn, answering))
        await _note_endpoint(turn, answering, streaming)
        timings["draft"] = _ms_since(started)
        debate["draft"] = draft.content
        if on_review is not None:
            await on_review()
        started = time.perf_counter()
        review = await _review(turn=turn, draft=draft.content)
        timings["review"] = _ms_since(started)
    except asyncio.CancelledError:
        debate["cancelled"] = True
        raise
    if review is None or review.verdict != "rewrite":
        debate["rewritten"] = False
        async for part in _draft_parts(draft):
            yield part
        return
    started = time.perf_counter()
    rewriting = Answering()
    try:
        room = answering.room
        messages = rewrite_messages(
            messages=answering.messages,
            draft=draft.content,
            review=review,
            budget=room.budget,
            counter=room.counter,
        )
        # The rewrite goes to the model that drafted.
        parts = _stream(turn, rewriting, prompt=messages, endpoint=answering.endpoint)
        first = await anext(parts)
    except (LLMError, StopAsyncIteration) as exc:
        # Nothing of the rewrite was shown yet: the draft is still an answer.
        debate["error"] = f"the rewrite failed: {type(exc).__name__}: {exc}"[:500]
        debate["rewritten"] = False
        async for part in _draft_parts(draft):
            yield part
        return
    debate["rewritten"] = True
    async with aclosing(parts):
        part = first
        while part is not None:
            if part.usage is not None:
                # The prompt counted is the answer's own, as checked against usage.
                part.usage = Usage(draft.prompt_tokens, part.usage.completion_tokens)
            yield part
            part = await anext(parts, None)
    timings["rewrite"] = _ms_since(started)


async def _review(*, turn: PreparedTurn, draft: str) -> DraftReview | None:
    """The review of the draft; None, with the error in the trace, when it fails."""
    debate = turn.trace["debate"]
    try:
        review = await sync_to_async(review_draft, thread_sensitive=False)(
            rules=turn.debate_rules, question=turn.messages[-1]["content"], draft=draft
        )
    except Exception as exc:  # noqa: BLE001 — any failure of the review sends the draft.
        logger.warning("the review of reply %s's draft failed: %s", turn.reply.pk, exc)
        debate["error"] = f"the review failed: {type(exc).__name__}: {exc}"[:500]
        return None
    debate["review"] = review.model_dump()
    return review


def _joint(kept: str, delta: str) -> str:
    """The space between an answer's text so far and the first words of its continuation,
    which a model starts as a new turn, without the space its next token would have had."""
    if kept and not kept[-1].isspace() and delta[0].isalnum():
        return " "
    return ""


def _start_streaming(*, turn: PreparedTurn) -> None:
    chat_services.message_start_streaming(
        message=turn.reply,
        model=turn.model,
        trace={**turn.trace, "timings_ms": dict(turn.trace["timings_ms"])},
    )


async def _keep_lease(turn: PreparedTurn) -> None:
    """Renew the reply's lease while it is generated, so no one takes it for orphaned."""
    renew = sync_to_async(chat_services.reply_lease_renew, thread_sensitive=False)
    while True:
        await asyncio.sleep(chat_services.REPLY_LEASE_SECONDS / 3)
        await renew(reply_id=turn.reply.pk)


def generate_title(*, messages: list[Message]) -> str:
    """A title for the conversation from its first exchange; "" when the model's is junk."""
    prompt = template_prompt(
        "title", slots={"exchange": bodies([f"{m.role}: {m.content}" for m in messages])}
    )
    reply = gateway.complete(role=TITLE, prompt=prompt, max_tokens=TITLE_MAX_TOKENS)
    return clean_title(reply.content)
