"""The completion sent back to the client: the whole answer as one JSON object, or streamed
as server-sent events; either can be stopped from the chat page."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import NamedTuple

from django.http import HttpResponse, JsonResponse

from apps.api.calls import MODEL_ID
from apps.api.errors import upstream_failed
from apps.chat import stops
from apps.chat.models import Message
from apps.cognition.answer import AnswerFailed
from apps.core.llm.limits import CHAT, role_endpoint, token_counter


class CompletionHead(NamedTuple):
    """The id, creation time and model that every response of one completion carries."""

    id: str
    created: int
    model: str | None

    def fields(self, object: str) -> dict:
        return {
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model or MODEL_ID,
        }


async def completion_whole(
    reply: Message, answering: AsyncIterator[str], head: CompletionHead
) -> HttpResponse:
    """The whole answer as one `chat.completion` object, once it has ended."""
    try:
        async for _ in _stoppable(reply, answering):
            pass
    except AnswerFailed as exc:
        return upstream_failed(exc).response()
    await reply.arefresh_from_db()
    return JsonResponse(
        {
            **head.fields("chat.completion"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": _finish_reason(reply),
                }
            ],
            "usage": _usage(reply),
        }
    )


_END = object()


async def _stoppable(reply: Message, answering: AsyncIterator[str]) -> AsyncIterator[str]:
    """The answer's pieces, generated in a task of its own that a Stop can cancel: the chat
    page's Stop, from any web process, ends an answer written for /v1 as it ends one written for
    the page. A stopped answer ends the call normally, its partial text saved as cancelled."""
    await stops.listen_for_stops()
    pieces: asyncio.Queue = asyncio.Queue()

    async def produce() -> None:
        try:
            async for text in answering:
                pieces.put_nowait(text)
        finally:
            pieces.put_nowait(_END)

    producer = asyncio.ensure_future(produce())
    stops.reply_running(reply_id=reply.pk, conversation_id=reply.conversation_id, task=producer)
    try:
        while (text := await pieces.get()) is not _END:
            yield text
        await producer  # AnswerFailed, or the Stop
    except asyncio.CancelledError:
        if not producer.cancelled():
            raise  # this call itself was cancelled (the client left)
    finally:
        producer.cancel()  # the client left: the answer so far is saved as cancelled


def _finish_reason(reply: Message) -> str:
    """OpenAI's words: an answer cut at its cap, or cut out of a repetition loop, is "length"."""
    cut = {Message.FinishReason.LENGTH, Message.FinishReason.LOOP}
    return "length" if reply.finish_reason in cut else "stop"


def _event(payload: dict | str) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n"


async def completion_stream(
    reply: Message,
    answering: AsyncIterator[str],
    head: CompletionHead,
    include_usage: bool,
    release_slot: Callable[[], None],
) -> AsyncIterator[str]:
    """The answer as server-sent `chat.completion.chunk` events; the stream slot is released
    however the stream ends."""
    try:
        async for event in _stream_events(reply, answering, head, include_usage):
            yield event
    finally:
        release_slot()


async def _stream_events(
    reply: Message, answering: AsyncIterator[str], head: CompletionHead, include_usage: bool
) -> AsyncIterator[str]:
    def chunk(choices: list[dict], **extra) -> str:
        return _event({**head.fields("chat.completion.chunk"), "choices": choices, **extra})

    def delta(fields: dict, finish_reason: str | None = None) -> str:
        return chunk([{"index": 0, "delta": fields, "finish_reason": finish_reason}])

    yield delta({"role": "assistant", "content": ""})
    try:
        async for text in _stoppable(reply, answering):
            yield delta({"content": text})
    except AnswerFailed as exc:
        yield _event(upstream_failed(exc).body())
        return
    await reply.arefresh_from_db()
    yield delta({}, finish_reason=_finish_reason(reply))
    if include_usage:
        yield chunk([], usage=_usage(reply))
    yield _event("[DONE]")


def _usage(reply: Message) -> dict:
    prompt_tokens = reply.prompt_tokens
    if prompt_tokens is None:
        prompt_tokens = reply.trace.get("prompt_tokens_estimate") or 0
    completion_tokens = reply.completion_tokens
    if completion_tokens is None:
        completion_tokens = token_counter(role_endpoint(CHAT)).text(reply.content)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
