"""The hot path of a turn: stream the answer through the gateway, record how it went.

The request itself is assembled in `turn_request`. The answer call never writes memory;
background reflection does that after the reply is saved.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async

from apps.chat import open_replies
from apps.chat import services as chat_services
from apps.chat.models import Message
from apps.cognition.debate import (
    DraftReview,
    debate_record,
    review_draft,
    rewrite_messages,
)
from apps.cognition.runaway import repeated_tail
from apps.cognition.turn_request import (
    MessageTooLong,
    PreparedTurn,
    turn_prompt,
)
from apps.core.llm.outcomes import LLMError, TimedOut, TooLong, Unreachable
from apps.core.llm.replies import Part, Reply, Usage
from apps.core.llm.streaming import Answering, collect, stream

logger = logging.getLogger(__name__)


class AnswerFailed(Exception):
    """The LLM could not produce the answer; the message says why in one sentence."""


class _StreamCutOff(Exception):
    pass


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
    return stream(
        prompt=prompt if prompt is not None else turn_prompt(turn),
        answering=answering,
        temperature=turn.temperature,
        sampling=turn.sampling(),
        max_tokens=turn.max_tokens,
        endpoint=endpoint or turn.endpoint,
        config=turn.config,
        fitted_to=turn.room,
    )


async def answer_reply(
    *,
    reply_id: int,
    turn: Awaitable[PreparedTurn],
    on_request: Callable[[], object] | None = None,
    on_saved: Callable[[Message], Awaitable[object]] | None = None,
    on_review: Callable[[], Awaitable[object]] | None = None,
    on_thinking: Callable[[str], Awaitable[object]] | None = None,
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
    (`reasoning`), never in the reply, and `on_thinking` is awaited with the thinking so far as
    it grows (to show it while the model thinks).

    With the internal debate on (RuntimeConfig.debate_enabled) and rules or preferences to hold
    the answer to, the answer is drafted without streaming, reviewed, and rewritten if the
    review finds it breaks one; `on_review` is awaited as the review starts (to say so), and
    the final answer is streamed (the rewrite) or yielded in pieces (the draft).
    """
    started = time.perf_counter()
    # The lease taken at the save is kept from now on: preparing the turn (recall, a cold
    # embedder, a loaded machine) may outlast it, and a reply without one is taken for orphaned.
    lease = asyncio.ensure_future(_keep_lease(reply_id))
    try:
        turn = await _prepared(turn, lease)
    except asyncio.CancelledError:
        # Stopped while the turn was prepared: nothing was asked of the LLM.
        await asyncio.shield(
            database_sync_to_async(open_replies.message_cancel_open, thread_sensitive=False)(
                reply_id=reply_id
            )
        )
        raise
    except MessageTooLong as exc:
        failed = await database_sync_to_async(
            open_replies.message_fail_open, thread_sensitive=False
        )(
            reply_id=reply_id,
            error=str(exc),
            # The page offers to edit the message rather than a Retry that would fail again.
            trace={"too_long": {"needed": exc.needed, "budget": exc.budget}},
        )
        if on_saved is not None and failed is not None:
            await on_saved(failed)
        raise AnswerFailed(str(exc)) from exc
    # Marking the reply as streaming is not needed for the request: it runs while the LLM
    # thinks about its first token, and is awaited before the outcome is saved.
    streaming = asyncio.ensure_future(
        database_sync_to_async(_start_streaming, thread_sensitive=False)(turn=turn)
    )
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
                if part.reasoning:
                    thinking += part.reasoning
                    if on_thinking is not None:
                        await on_thinking(thinking)
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
        cache = usage.cache_trace() if usage else None
        if cache is not None:
            # What the server evaluated anew of the prompt, and what its cache held.
            turn.trace["prompt_cache"] = cache
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


async def _draft_parts(draft: Reply):
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
        draft = await collect(_stream(turn, answering))
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
            rules=turn.debate_rules,
            question=turn.messages[-1]["content"],
            draft=draft,
            marker=turn.marker,
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


async def _prepared(turn: Awaitable[PreparedTurn], lease: asyncio.Future) -> PreparedTurn:
    """The prepared turn; its reply's lease given up when there is none (stopped, too long)."""
    try:
        return await turn
    except BaseException:
        lease.cancel()
        raise


async def _keep_lease(reply_id: int) -> None:
    """Renew the reply's lease while it is prepared and generated, so no one takes it for
    orphaned."""
    renew = sync_to_async(open_replies.reply_lease_renew, thread_sensitive=False)
    while True:
        await asyncio.sleep(open_replies.REPLY_LEASE_SECONDS / 3)
        await renew(reply_id=reply_id)
