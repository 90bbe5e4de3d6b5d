"""A call to /v1/chat/completions, accepted and started: the caller's key, its request and
options, one of its stream slots, its conversation, and the turn saved and under way."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable
from typing import NamedTuple

import pydantic
from django.conf import settings
from django.core.exceptions import RequestDataTooBig

from apps.accounts.models import ApiKey
from apps.accounts.selectors import api_key_for_token, user_settings_loaded
from apps.accounts.services import api_key_mark_used
from apps.accounts.throttle import bad_api_key_record, bad_api_key_wait
from apps.api.errors import ApiError, bad_request, rate_limited
from apps.api.schemas import ChatCompletionRequest
from apps.api.selectors import conversation_sharing_history
from apps.api.services import ConversationBusy, api_turn_start
from apps.chat.admission import stream_slot_release, turn_admit
from apps.chat.errors import ChatError, ChatRateLimited
from apps.chat.models import Conversation, Message
from apps.chat.selectors import conversation_for_user, history_kept
from apps.chat.services import SentTurn
from apps.cognition.context import RecallBusy, turn_search_start
from apps.cognition.pipeline import StartedRecall, TurnRun, turn_begin
from apps.cognition.turn_request import PreparedTurn
from apps.cognition.turn_state import CallOptions
from apps.core.llm.chat_models import listed_chat_models
from apps.core.llm.servers import model_listed
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

MODEL_ID = "thalamus"
CONVERSATION_HEADER = "X-Thalamus-Conversation"
MEMORY_HEADER = "X-Thalamus-Memory"


def authenticate(request) -> ApiKey:
    """The caller's API key from its bearer token, or 401 (429 for an address that keeps
    sending wrong ones)."""
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


def request_body(request) -> bytes:
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
        raise bad_request(f"The request body is not valid JSON: {exc}.") from exc
    try:
        return ChatCompletionRequest.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(part) for part in first["loc"]) or None
        raise bad_request(f"{param or 'body'}: {first['msg']}", param=param) from exc


def _admit(key: ApiKey, config: RuntimeConfig) -> str:
    """One of the user's stream slots for this answer, or 429 (see chat's turn_admit)."""
    try:
        return turn_admit(user_id=key.user_id, config=config)
    except ChatRateLimited as exc:
        raise rate_limited(exc) from exc
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
        raise bad_request(f"{MEMORY_HEADER} is either on or off.", param=MEMORY_HEADER)
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


def _save_turn(
    key: ApiKey, conversation: Conversation | None, text: str, config: RuntimeConfig
) -> SentTurn:
    try:
        return api_turn_start(user=key.user, conversation=conversation, content=text, config=config)
    except ConversationBusy as exc:
        raise ApiError(
            409, str(exc), type="invalid_request_error", code="conversation_busy"
        ) from exc
    except ChatRateLimited as exc:
        raise rate_limited(exc) from exc
    except ChatError as exc:
        raise bad_request(str(exc), param="messages") from exc


class Call(NamedTuple):
    key: ApiKey
    body: ChatCompletionRequest
    slot: str
    config: RuntimeConfig
    # The history the client sent before the user's message (role, text).
    earlier: list[tuple[str, str]]
    # The turn saved, and its recall under way.
    sent: SentTurn
    started: StartedRecall


def call_accept(request, raw_body: bytes) -> Call:
    """The caller's key, its request, one of its stream slots for the answer, the conversation
    it continues and its turn saved there; the message's embedding and search, then the
    recall, are started on the way.

    One thread hop from the request to the turn: each hop costs a wait for a thread, and the
    recall starts from here the moment the conversation is known, while this thread saves the
    message. A refused call starts nothing, and a conversation the caller names is checked
    before anything is asked of the embedder.
    """
    key = authenticate(request)
    body = _parse_request(raw_body)
    options = _call_options(request, body)
    user_message = body.last_user_message()
    if user_message is None or not user_message.text.strip():
        raise bad_request("The request has no user message to answer.", param="messages")
    text = user_message.text
    earlier = body.earlier_turns()
    raw_id = request.headers.get(CONVERSATION_HEADER)
    conversation = _get_conversation_for_key(key, raw_id) if raw_id is not None else None
    config = runtime_config()
    slot = _admit(key, config)
    started = None
    try:
        own = None
        # When the embedding pool is full the recall embeds the message on its own thread.
        if options.remember:
            with contextlib.suppress(RecallBusy):
                own = turn_search_start(user_id=key.user_id, text=text, config=config)
        if raw_id is None:
            # Matched by the history it shares while the message is embedded and searched.
            conversation = conversation_sharing_history(user=key.user, turns=earlier)
        started = turn_begin(
            user=key.user,
            conversation=conversation,
            text=text,
            config=config,
            own=own,
            options=options,
            prefs=user_settings_loaded(user=key.user),
        )
        sent = _save_turn(key, conversation, text, config)
    except BaseException:
        if started is not None and started.recalled is not None:
            started.recalled.cancel()
        stream_slot_release(user_id=key.user_id, slot=slot)
        raise
    return Call(key, body, slot, config, earlier, sent, started)


def call_start_turn(call: Call) -> tuple[Message, Awaitable[PreparedTurn]]:
    """Go on with the saved turn in the event loop, as the chat page's socket does, its recall
    under way. Returns the reply and its preparation, to answer."""
    run = TurnRun.begun(call.started)
    sent, earlier = call.sent, call.earlier
    history = sent.history
    if earlier:
        # The client's messages are the history of its call (an edited or trimmed history too);
        # where they are the conversation's own, the saved ones stand for them, so each is
        # replayed with the note memory added to it (the server's prompt cache then holds).
        # Compared as text first: a Message per turn of a long history cost a millisecond of
        # the turn's CPU, and they are needed only when the histories differ.
        kept = history_kept(total=len(earlier) + 1, window=call.config.short_term_window)
        client_said = [*earlier, (sent.question.role, sent.question.content)][-kept:]
        if client_said != _said(history):
            history = [Message(role=role, content=said) for role, said in client_said[:-1]]
            history.append(sent.question)
    run.turn.input.conversation = sent.reply.conversation
    return sent.reply, run.prepare(reply=sent.reply, history=history)


def _said(messages: list[Message]) -> list[tuple[str, str]]:
    return [(message.role, message.content) for message in messages]
