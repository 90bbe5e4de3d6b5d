"""The hot path of a turn: build the prompt, stream the answer, record how it went.

The answer call never writes memory; background reflection does that after the reply is saved.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import openai
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from apps.chat import services as chat_services
from apps.chat.models import Message
from apps.chat.selectors import history_before
from apps.cognition.prompts import fill_prompt, prompt_text, render_prompt
from apps.core.llm import async_llm_client, llm_client, stream_chat_chunks
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

logger = logging.getLogger(__name__)

NOTHING_REMEMBERED = "(nothing yet)"


class AnswerFailed(Exception):
    """The LLM could not produce the answer; the message says why in one sentence."""


class _StreamCutOff(Exception):
    pass


def estimate_tokens(text: str) -> int:
    return len(text) // 4 + 1


@dataclass
class PreparedTurn:
    reply: Message
    model: str
    temperature: float
    base_url: str
    messages: list[dict]
    trace: dict = field(default_factory=dict)


@dataclass
class MemoryForTurn:
    """What a turn needs besides its history: the memory block and the system prompt around it."""

    block: str
    trace: dict
    ms: float
    system: str
    config: RuntimeConfig


def memory_for_turn(
    *,
    user,
    conversation,
    text: str,
    config: RuntimeConfig | None = None,
    embedded: Future | None = None,
) -> MemoryForTurn:
    """What the memory knows for this turn; callers may run it while the message is saved.

    `embedded`: the embedding of `text` already under way (`start_turn_embedding`).
    """
    from apps.memory.selectors import memory_context_for_turn

    started = time.perf_counter()
    config = config or runtime_config()
    # Read before the recall, which spends most of its time waiting on the embedding, rather
    # than after it, when the answer waits on this.
    template = prompt_text("answer")
    context = memory_context_for_turn(
        user=user, conversation=conversation, text=text, config=config, embedded=embedded
    )
    system = fill_prompt(
        "answer",
        template,
        date=timezone.localdate().isoformat(),
        user_name=user.get_full_name() or user.get_username(),
        memory=context.prompt_block or NOTHING_REMEMBERED,
    )
    return MemoryForTurn(
        context.prompt_block,
        context.trace,
        (time.perf_counter() - started) * 1000,
        system,
        config,
    )


def build_turn(*, reply: Message, history: list[Message], memory: MemoryForTurn) -> PreparedTurn:
    """The request for the LLM from parts already read; no database access."""
    started = time.perf_counter()
    config = memory.config
    budget = config.token_budget - estimate_tokens(memory.system)
    kept: list[Message] = []
    for message in reversed(history):
        cost = estimate_tokens(message.content)
        if kept and cost > budget:
            break
        kept.append(message)
        budget -= cost
    kept.reverse()
    messages = [{"role": "system", "content": memory.system}] + [
        {"role": m.role, "content": m.content} for m in kept
    ]
    trace = {
        "memory": memory.trace,
        "history_messages": len(kept),
        "history_dropped": len(history) - len(kept),
        "prompt_tokens_estimate": sum(estimate_tokens(m["content"]) for m in messages),
        "timings_ms": {
            "memory": round(memory.ms, 2),
            "context": round((time.perf_counter() - started) * 1000, 2),
        },
    }
    return PreparedTurn(
        reply=reply,
        model=config.chat_model or settings.THALAMUS_CHAT_MODEL,
        temperature=config.temperature,
        base_url=config.llm_base_url or settings.THALAMUS_LLM_BASE_URL,
        messages=messages,
        trace=trace,
    )


def turn_history(*, reply: Message, config: RuntimeConfig | None = None) -> list[Message]:
    return history_before(message=reply, limit=(config or runtime_config()).short_term_window)


def prepare_turn(*, reply_id: int) -> PreparedTurn:
    """The request for a saved reply with everything read here, in turn (Retry, the API)."""
    reply = Message.objects.select_related("conversation__owner").get(pk=reply_id)
    conversation = reply.conversation
    config = runtime_config()
    history = turn_history(reply=reply, config=config)
    memory = memory_for_turn(
        user=conversation.owner,
        conversation=conversation,
        text=history[-1].content if history else "",
        config=config,
    )
    return build_turn(reply=reply, history=history, memory=memory)


@dataclass
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None


def _read_chunk(chunk: object) -> tuple[str, str | None, Usage | None]:
    """Text delta, finish reason and usage of one streamed chunk; ValueError if it is not one."""
    if not isinstance(chunk, dict):
        raise ValueError(f"a streamed chunk is not a JSON object: {chunk!r:.200}")
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        usage = Usage(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))
    else:
        usage = None
    choices = chunk.get("choices") or []
    if not isinstance(choices, list) or not choices:
        return "", None, usage
    choice = choices[0]
    if not isinstance(choice, dict):
        raise ValueError(f"a streamed choice is not a JSON object: {choice!r:.200}")
    delta = choice.get("delta") or {}
    content = delta.get("content") if isinstance(delta, dict) else None
    return (content if isinstance(content, str) else ""), choice.get("finish_reason"), usage


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _failure_sentence(exc: Exception, *, base_url: str, streamed: bool) -> str:
    if isinstance(exc, _StreamCutOff):
        return "The answer was cut off before it finished."
    if isinstance(exc, openai.APITimeoutError):
        return "The language model took too long to answer."
    if isinstance(exc, openai.APIConnectionError):
        if streamed:
            return "The answer was cut off before it finished."
        return f"The language model at {base_url} could not be reached."
    if isinstance(exc, openai.APIStatusError):
        return f"The language model returned an error (HTTP {exc.status_code})."
    return "The language model sent something Thalamus could not read."


def _finish(*, turn: PreparedTurn, **outcome) -> Message:
    return chat_services.message_finish(
        message=turn.reply, trace=turn.trace, background=False, **outcome
    )


def _queue_background(*, turn: PreparedTurn, message: Message) -> None:
    from apps.memory.selectors import mark_memories_used

    try:
        chat_services.message_queue_background(message=message)
        mark_memories_used(turn.trace.get("memory", {}))
    except Exception:  # noqa: BLE001 — the reply is saved and shown; a broker outage is logged.
        logger.exception("queueing the background work of reply %s failed", message.pk)


async def answer_reply(
    *,
    reply_id: int,
    turn: Awaitable[PreparedTurn] | None = None,
    on_request: Callable[[], object] | None = None,
    on_saved: Callable[[Message], Awaitable[object]] | None = None,
) -> AsyncIterator[str]:
    """Stream the answer for a saved, pending reply, yielding text deltas.

    `turn` may be the prepared request, built while the message was being saved (the consumer
    does that); without it the reply and its history are read here. The outcome is saved
    whatever happens: complete, failed (then AnswerFailed is raised) or cancelled (when the
    consuming task is cancelled; the partial answer is kept). `on_request` is called as the
    request to the LLM goes out: work that can wait for the model's first token goes there.
    `on_saved` is awaited with the reply as saved with its outcome (to show it), before the
    background work the reply starts (reflection, its title) is queued.
    """
    started = time.perf_counter()
    if turn is None:
        # Not thread-sensitive, so concurrent turns do not queue behind each other on one thread.
        turn = database_sync_to_async(prepare_turn, thread_sensitive=False)(reply_id=reply_id)
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
    # Marking the reply as streaming is not needed for the request: it runs while the LLM
    # thinks about its first token, and is awaited before the outcome is saved.
    streaming = asyncio.ensure_future(
        database_sync_to_async(chat_services.message_start_streaming, thread_sensitive=False)(
            message=turn.reply,
            model=turn.model,
            trace={**turn.trace, "timings_ms": dict(turn.trace["timings_ms"])},
        )
    )
    lease = asyncio.ensure_future(_keep_lease(turn.reply.pk))
    parts: list[str] = []
    ttft_ms = None
    usage = None
    finished = False
    outcome = Message.Status.FAILED
    error = ""
    llm_started = time.perf_counter()
    try:
        client = async_llm_client(base_url=turn.base_url, timeout=settings.THALAMUS_LLM_TIMEOUT)
        if on_request is not None:
            on_request()
        stream = await stream_chat_chunks(
            client,
            model=turn.model,
            messages=turn.messages,
            temperature=turn.temperature,
            stream_options={"include_usage": True},
        )
        async with stream:
            async for chunk in stream:
                delta, finish_reason, chunk_usage = _read_chunk(chunk)
                if chunk_usage is not None:
                    usage = chunk_usage
                if delta:
                    if ttft_ms is None:
                        ttft_ms = (time.perf_counter() - started) * 1000
                    parts.append(delta)
                    yield delta
                if finish_reason:
                    finished = True
        if not finished:
            raise _StreamCutOff("the stream ended without a finish reason")
        outcome = Message.Status.COMPLETE
    except (openai.OpenAIError, ValueError, _StreamCutOff) as exc:
        error = _failure_sentence(exc, base_url=turn.base_url, streamed=bool(parts))
        turn.trace["error_detail"] = f"{type(exc).__name__}: {exc}"[:500]
    except BaseException:
        # Cancelled (Stop, or the server shutting down): keep what arrived.
        outcome = Message.Status.CANCELLED
        raise
    finally:
        lease.cancel()
        now = time.perf_counter()
        turn.trace["timings_ms"]["llm"] = round((now - llm_started) * 1000, 2)
        turn.trace["timings_ms"]["total"] = round((now - started) * 1000, 2)
        content = "".join(parts)
        # The streaming mark must land first, or it would overwrite the outcome.
        await asyncio.gather(streaming, return_exceptions=True)
        saved = await database_sync_to_async(_finish, thread_sensitive=False)(
            turn=turn,
            status=outcome,
            content=content,
            error=error,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
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


async def _keep_lease(reply_id: int) -> None:
    """Renew the reply's lease while it is generated, so no one takes it for orphaned."""
    renew = sync_to_async(chat_services.reply_lease_renew, thread_sensitive=False)
    while True:
        await asyncio.sleep(chat_services.REPLY_LEASE_SECONDS / 3)
        await renew(reply_id=reply_id)


def generate_title(*, messages: list[Message]) -> str:
    config = runtime_config()
    exchange = "\n".join(f"{m.role}: {m.content[:500]}" for m in messages)
    response = llm_client(
        base_url=config.llm_base_url or settings.THALAMUS_LLM_BASE_URL, timeout=20.0
    ).chat.completions.create(
        model=config.chat_model or settings.THALAMUS_CHAT_MODEL,
        messages=[{"role": "user", "content": render_prompt("title", exchange=exchange)}],
        temperature=0.2,
        max_tokens=24,
    )
    title = (response.choices[0].message.content or "").strip().splitlines()
    return title[0][:80] if title else ""
