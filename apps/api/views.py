"""The OpenAI-compatible front door: any OpenAI client can chat with Thalamus and its memory.

Requests authenticate with `Authorization: Bearer <API key>`, not the session, so these views
are exempt from the login and CSRF middleware. Errors use OpenAI's error JSON shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import NamedTuple

import pydantic
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.models import ApiKey
from apps.accounts.selectors import api_key_for_token
from apps.accounts.services import api_key_mark_used
from apps.accounts.throttle import bad_api_key_record, bad_api_key_wait
from apps.api.schemas import ChatCompletionRequest
from apps.api.selectors import conversation_sharing_history
from apps.api.services import ConversationBusy, api_turn_start
from apps.chat import stops
from apps.chat.admission import stream_slot_release, turn_admit
from apps.chat.errors import ChatError, ChatRateLimited
from apps.chat.models import Conversation, Message
from apps.chat.selectors import conversation_for_user, history_kept
from apps.chat.services import SentTurn
from apps.cognition.answer import AnswerFailed, answer_reply
from apps.cognition.context import RecallBusy, start_turn_embedding
from apps.cognition.pipeline import CallOptions, start_turn
from apps.cognition.turn_request import PreparedTurn
from apps.core.db import on_pool_thread
from apps.core.llm.chat_models import listed_chat_models
from apps.core.llm.limits import CHAT, role_endpoint, token_counter
from apps.core.llm.servers import model_listed
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

MODEL_ID = "thalamus"
MODEL_CREATED = 1735689600
CONVERSATION_HEADER = "X-Thalamus-Conversation"
MEMORY_HEADER = "X-Thalamus-Memory"


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str,
        code: str,
        param=None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = (
            status,
            message,
            type,
            code,
            param,
        )
        self.headers = headers

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JsonResponse:
        return JsonResponse(self.body(), status=self.status, headers=self.headers)


def _bad_request(message: str, *, param: str | None = None) -> ApiError:
    return ApiError(400, message, type="invalid_request_error", code="invalid_request", param=param)


def _authenticate(request) -> ApiKey:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            401,
            "Missing API key: send `Authorization: Bearer <key>`; create a key on your "
            "Thalamus settings page.",
            type="authentication_error",
            code="missing_api_key",
        )
    address = request.META.get("REMOTE_ADDR", "")
    wait = bad_api_key_wait(address=address)
    if wait:
        raise ApiError(
            429,
            f"Too many wrong API keys from this address. Try again in {wait} seconds.",
            type="rate_limit_error",
            code="too_many_wrong_keys",
            headers={"Retry-After": str(wait)},
        )
    key = api_key_for_token(token=token.strip())
    if key is None:
        bad_api_key_record(address=address)
        raise ApiError(
            401,
            "Invalid or revoked API key.",
            type="authentication_error",
            code="invalid_api_key",
        )
    api_key_mark_used(key=key)
    return key


def _get_conversation_for_key(key: ApiKey, raw_id: str) -> Conversation:
    conversation = None
    if raw_id.strip().isdigit():
        conversation = conversation_for_user(user=key.user, pk=int(raw_id))
    if conversation is None:
        raise ApiError(
            404,
            f"No conversation {raw_id!r}.",
            type="invalid_request_error",
            code="conversation_not_found",
            param=CONVERSATION_HEADER,
        )
    return conversation


def _request_body(request) -> bytes:
    """The JSON body, at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes (413 beyond)."""
    cap = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        if int(request.META.get("CONTENT_LENGTH") or 0) <= cap:
            return request.body
    except (ValueError, RequestDataTooBig):
        pass
    raise ApiError(
        413,
        f"The request body is larger than {cap:,} bytes.",
        type="invalid_request_error",
        code="request_too_large",
    )


def _parse_request(body: bytes) -> ChatCompletionRequest:
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise _bad_request(f"The request body is not valid JSON: {exc}.") from exc
    try:
        return ChatCompletionRequest.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(part) for part in first["loc"]) or None
        raise _bad_request(f"{param or 'body'}: {first['msg']}", param=param) from exc


def _rate_limited(exc: ChatRateLimited) -> ApiError:
    return ApiError(
        429,
        str(exc),
        type="rate_limit_error",
        code="rate_limit_exceeded",
        headers={"Retry-After": str(exc.retry_after)},
    )


def _admit(key: ApiKey) -> str:
    """One of the user's stream slots for this answer, or 429 (see chat's turn_admit)."""
    try:
        return turn_admit(user_id=key.user_id, config=runtime_config())
    except ChatRateLimited as exc:
        raise _rate_limited(exc) from exc
    except ChatError as exc:
        raise ApiError(429, str(exc), type="rate_limit_error", code="too_many_streams") from exc


def _call_options(request, body: ChatCompletionRequest) -> CallOptions:
    """What the client set for this call: the upstream model, sampling, its system prompt, and
    whether memory takes part (`X-Thalamus-Memory: off`)."""
    model = None
    if body.model not in (None, "", MODEL_ID):
        prefix, _, model = body.model.partition("/")
        listed = listed_chat_models() if prefix == MODEL_ID else None
        if (
            prefix != MODEL_ID
            or not model.strip()
            or (listed is not None and not model_listed(model, listed))
        ):
            raise ApiError(
                404,
                f"No model {body.model!r}: ask for {MODEL_ID!r} (the configured chat model) "
                f"or {MODEL_ID + '/<name>'!r} for a model the chat's server lists "
                "(GET /v1/models).",
                type="invalid_request_error",
                code="model_not_found",
                param="model",
            )
    memory = request.headers.get(MEMORY_HEADER, "on").strip().lower()
    if memory not in ("on", "off"):
        raise _bad_request(f"{MEMORY_HEADER} is either on or off.", param=MEMORY_HEADER)
    return CallOptions(
        model=model,
        temperature=body.temperature,
        top_p=body.top_p,
        max_tokens=body.max_completion_tokens or body.max_tokens,
        stop=body.stop_list(),
        seed=body.seed,
        system=body.system_prompt(),
        remember=memory == "on",
    )


def _conversation_for_call(request, key: ApiKey, earlier: list[tuple[str, str]]):
    """The conversation the header names, else the one holding the client's history, else None
    (a new one)."""
    raw_id = request.headers.get(CONVERSATION_HEADER)
    if raw_id is not None:
        return _get_conversation_for_key(key, raw_id)
    return conversation_sharing_history(user=key.user, turns=earlier)


def _save_turn(
    key: ApiKey, conversation: Conversation | None, text: str, config: RuntimeConfig
) -> SentTurn:
    try:
        return api_turn_start(
            user=key.user, conversation=conversation, content=text, history=config.short_term_window
        )
    except ConversationBusy as exc:
        raise ApiError(
            409, str(exc), type="invalid_request_error", code="conversation_busy"
        ) from exc
    except ChatRateLimited as exc:
        raise _rate_limited(exc) from exc
    except ChatError as exc:
        raise _bad_request(str(exc), param="messages") from exc


class Call(NamedTuple):
    key: ApiKey
    body: ChatCompletionRequest
    options: CallOptions
    slot: str
    config: RuntimeConfig


def _accept(request, raw_body: bytes) -> Call:
    """The caller's key, its request, and one of its stream slots for the answer."""
    key = _authenticate(request)
    body = _parse_request(raw_body)
    options = _call_options(request, body)
    return Call(key, body, options, _admit(key), runtime_config())


async def _start_turn(request, call: Call) -> tuple[Message, Awaitable[PreparedTurn]]:
    """Save the turn and start its pipeline, as the chat page's socket does: the message is
    embedded from the start and recalled from while it is saved. Returns the reply and its
    preparation, to answer."""
    user_message = call.body.last_user_message()
    if user_message is None or not user_message.text.strip():
        raise _bad_request("The request has no user message to answer.", param="messages")
    text = user_message.text
    earlier = call.body.earlier_turns()
    named = request.headers.get(CONVERSATION_HEADER) is not None
    if named:
        # A conversation the caller names is checked before anything is asked of the embedder:
        # a refused call starts nothing.
        conversation = await on_pool_thread(_conversation_for_call)(request, call.key, earlier)
    embedded = None
    # When the embedding pool is full the recall embeds the message on its own thread.
    if call.options.remember:
        with contextlib.suppress(RecallBusy):
            embedded = start_turn_embedding(text=text, config=call.config)
    if not named:
        # Matched by the history it shares while the message is embedded.
        conversation = await on_pool_thread(_conversation_for_call)(request, call.key, earlier)
    run = start_turn(
        user=call.key.user,
        conversation=conversation,
        text=text,
        config=call.config,
        embedded=embedded,
        options=call.options,
    )
    try:
        sent = await on_pool_thread(_save_turn)(call.key, conversation, text, call.config)
    except BaseException:
        run.cancel()
        raise
    history = sent.history
    if earlier:
        # The client's messages are the history of its call (an edited or trimmed history too);
        # where they are the conversation's own, the saved ones stand for them, so each is
        # replayed with the note memory added to it (the server's prompt cache then holds).
        client_history = [Message(role=role, content=said) for role, said in earlier]
        kept = history_kept(total=len(earlier) + 1, window=call.config.short_term_window)
        client_history = (client_history + [sent.question])[-kept:]
        if _said(client_history) != _said(history):
            history = client_history
    run.turn.input.conversation = sent.reply.conversation
    return sent.reply, run.prepare(reply=sent.reply, history=history)


def _said(messages: list[Message]) -> list[tuple[str, str]]:
    return [(message.role, message.content) for message in messages]


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


def _upstream_failed(exc: AnswerFailed) -> ApiError:
    return ApiError(502, str(exc), type="api_error", code="upstream_error")


@login_not_required
@csrf_exempt
@require_GET
async def models(request):
    try:
        upstream = await on_pool_thread(_listed_models)(request)
    except ApiError as exc:
        return exc.response()
    listed = [MODEL_ID] + [f"{MODEL_ID}/{name}" for name in upstream]
    data = [
        {"id": name, "object": "model", "created": MODEL_CREATED, "owned_by": "thalamus"}
        for name in listed
    ]
    return JsonResponse({"object": "list", "data": data})


def _listed_models(request) -> list[str]:
    """After the key: the chat models the chat's server lists, within what the admin allows
    (cached; none when it cannot be asked), each callable as `thalamus/<name>`; never an
    embedding model."""
    _authenticate(request)
    return listed_chat_models() or []


@login_not_required
@csrf_exempt
@require_POST
async def chat_completions(request):
    try:
        call = await on_pool_thread(_accept)(request, _request_body(request))
    except ApiError as exc:
        return exc.response()
    body = call.body

    def release_slot() -> None:
        stream_slot_release(user_id=call.key.user_id, slot=call.slot)

    try:
        reply, prepared = await _start_turn(request, call)
    except ApiError as exc:
        release_slot()
        return exc.response()
    answering = answer_reply(reply_id=reply.pk, turn=prepared)
    head = CompletionHead(f"chatcmpl-{reply.pk}", int(reply.created_at.timestamp()), body.model)
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        response = StreamingHttpResponse(
            _stream(reply, answering, head, include_usage, release_slot),
            content_type="text/event-stream",
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
    else:
        try:
            response = await _answer_whole(reply, answering, head)
        finally:
            release_slot()
    response[CONVERSATION_HEADER] = str(reply.conversation_id)
    return response


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


async def _answer_whole(
    reply: Message, answering: AsyncIterator[str], head: CompletionHead
) -> HttpResponse:
    try:
        async for _ in _stoppable(reply, answering):
            pass
    except AnswerFailed as exc:
        return _upstream_failed(exc).response()
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


async def _stream(
    reply: Message,
    answering: AsyncIterator[str],
    head: CompletionHead,
    include_usage: bool,
    release_slot: Callable[[], None],
) -> AsyncIterator[str]:
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
        yield _event(_upstream_failed(exc).body())
        return
    await reply.arefresh_from_db()
    yield delta({}, finish_reason=_finish_reason(reply))
    if include_usage:
        yield chunk([], usage=_usage(reply))
    yield _event("[DONE]")
