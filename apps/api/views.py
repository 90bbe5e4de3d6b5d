"""The OpenAI-compatible front door: any OpenAI client can chat with Thalamus and its memory.

Requests authenticate with `Authorization: Bearer <API key>`, not the session, so these views
are exempt from the login and CSRF middleware. Errors use OpenAI's error JSON shape (`errors`).
A call is accepted and its turn started in `calls`; the answer goes back as `completions`.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from apps.api.calls import (
    CONVERSATION_HEADER,
    MODEL_ID,
    authenticate,
    call_accept,
    call_start_turn,
    request_body,
)
from apps.api.completions import CompletionHead, completion_stream, completion_whole
from apps.api.errors import ApiError
from apps.chat.admission import stream_slot_release
from apps.cognition.answer import answer_reply
from apps.core.db import on_pool_thread
from apps.core.llm.chat_models import listed_chat_models

MODEL_CREATED = 1735689600


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
    authenticate(request)
    return listed_chat_models() or []


@login_not_required
@csrf_exempt
@require_POST
async def chat_completions(request):
    try:
        call = await on_pool_thread(call_accept)(request, request_body(request))
    except ApiError as exc:
        return exc.response()
    body = call.body

    def release_slot() -> None:
        stream_slot_release(user_id=call.key.user_id, slot=call.slot)

    try:
        reply, prepared = call_start_turn(call)
    except BaseException:
        release_slot()
        raise
    answering = answer_reply(reply_id=reply.pk, turn=prepared)
    head = CompletionHead(f"chatcmpl-{reply.pk}", int(reply.created_at.timestamp()), body.model)
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        response = StreamingHttpResponse(
            completion_stream(reply, answering, head, include_usage, release_slot),
            content_type="text/event-stream",
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
    else:
        try:
            response = await completion_whole(reply, answering, head)
        finally:
            release_slot()
    response[CONVERSATION_HEADER] = str(reply.conversation_id)
    return response
