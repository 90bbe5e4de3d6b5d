from __future__ import annotations

import asyncio
from collections.abc import Callable

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from apps.chat import broadcasts, services, stops
from apps.chat.models import Conversation, Message
from apps.chat.selectors import (
    VIA_FILTERS,
    conversation_for_user,
    conversations_for_user,
    message_of,
    messages_of,
)
from apps.cognition import branching
from apps.cognition.answer import AnswerFailed
from apps.cognition.message_room import message_room
from apps.cognition.pipeline import answer_saved_reply
from apps.core.llm.chat_models import chat_models, picked_chat_model
from apps.core.selectors import runtime_config
from apps.memory import browser_selectors, browser_services
from apps.memory.models import MemoryNode

PAGE_SIZE = 30
# Text for the conversation page's composer: the home composer's first message, which the page
# sends over its socket ("send"), or the message of a failed turn taken back to be edited.
DRAFT_KEY = "chat_draft"


def _get_conversation_for_user(request, pk: int) -> Conversation:
    conversation = conversation_for_user(user=request.user, pk=pk)
    if conversation is None:
        raise Http404("No such conversation.")
    return conversation


def _conversation_page(request, query: str = ""):
    paginator = Paginator(
        conversations_for_user(user=request.user, query=query, via=_via(request)), PAGE_SIZE
    )
    return paginator.get_page(request.GET.get("page") or 1)


def _via(request) -> str:
    """The sidebar's filter: every conversation (""), the chats of this site, or the API's."""
    via = request.GET.get("via", "")
    return via if via in VIA_FILTERS else ""


def _send(*, user, conversation: Conversation, content: str) -> Message:
    """Save a message and its pending reply; one the model has no room for is refused."""
    room = message_room(user=user, conversation=conversation)
    return services.message_send(
        conversation=conversation, content=content, refusal=room.refusal
    ).reply


@require_GET
def home(request):
    query = request.GET.get("q", "").strip()
    config = runtime_config()
    return render(
        request,
        "chat/app.html",
        {
            "page": _conversation_page(request, query),
            "q": query,
            "via": _via(request),
            "conversation": None,
            "max_chars": config.max_message_chars,
            "room": message_room(user=request.user, config=config),
        },
    )


@require_GET
def conversation_detail(request, pk: int):
    conversation = _get_conversation_for_user(request, pk)
    # A reply left open by a process that died is shown failed, with Retry.
    open_reply = services.live_open_reply(conversation=conversation)
    draft = request.session.pop(DRAFT_KEY, None) or {}
    if draft.get("conversation") != pk:
        draft = {}
    query = request.GET.get("q", "").strip()
    config = runtime_config()
    return render(
        request,
        "chat/app.html",
        {
            "page": _conversation_page(request, query),
            "q": query,
            "via": _via(request),
            "conversation": conversation,
            "chat_messages": messages_of(conversation=conversation),
            "open_reply": open_reply,
            "max_chars": config.max_message_chars,
            "room": message_room(user=request.user, conversation=conversation, config=config),
            "draft": draft.get("content", ""),
            "autosend": draft.get("send", False),
            "chat_models": chat_models(config),
            "picked_model": picked_chat_model(conversation.chat_model, config) or "",
        },
    )


@require_GET
def conversation_list(request):
    query = request.GET.get("q", "")
    return render(
        request,
        "chat/_conversation_list_page.html",
        {"page": _conversation_page(request, query), "q": query, "via": _via(request)},
    )


@require_POST
def conversation_new(request):
    temporary = request.POST.get("temporary") == "1"
    conversation = services.conversation_start(user=request.user, temporary=temporary)
    return redirect("chat:conversation", pk=conversation.pk)


@require_POST
def conversation_begin(request):
    """The home page's composer: typing starts a conversation. With a script (`live`), the
    conversation page sends the message over its socket, where the answer streams and can be
    stopped; without one it is answered here, as `message_send` does."""
    content = request.POST.get("content", "")
    if not content.strip():
        return redirect("home")
    conversation = services.conversation_start(user=request.user)
    if request.POST.get("live") == "1":
        request.session[DRAFT_KEY] = {
            "conversation": conversation.pk,
            "content": content,
            "send": True,
        }
        return redirect("chat:conversation", pk=conversation.pk)
    return _answer_and_show(
        request,
        conversation.pk,
        lambda: _send(user=request.user, conversation=conversation, content=content),
    )


@require_POST
def conversation_rename(request, pk: int):
    conversation = _get_conversation_for_user(request, pk)
    services.conversation_rename(conversation=conversation, title=request.POST.get("title", ""))
    # The other open pages of this user follow: their sidebar item and, on this conversation,
    # its header.
    broadcasts.conversation_changed(conversation=conversation)
    if request.htmx:
        current = request.htmx.current_url_abs_path or ""
        return render(
            request,
            "chat/_renamed.html",
            {
                "conversation": conversation,
                "here": current.startswith(reverse("chat:conversation", args=[pk])),
            },
        )
    return redirect("chat:conversation", pk=pk)


@require_POST
def conversation_model(request, pk: int):
    """The chat model picker: the model this conversation's next answers come from, one of
    those offered; the configured one is kept as blank, so it follows the admin's changes."""
    conversation = _get_conversation_for_user(request, pk)
    picked = request.POST.get("chat_model", "").strip()
    offered = chat_models()
    if picked not in offered:
        if request.htmx:
            return HttpResponse("That model is not offered.", status=400)
        messages.error(request, "That model is not offered.")
        return redirect("chat:conversation", pk=pk)
    services.conversation_model_pick(
        conversation=conversation, model="" if picked == offered[0] else picked
    )
    if request.htmx:
        return HttpResponse(status=204)
    return redirect("chat:conversation", pk=pk)


@require_http_methods(["GET", "POST"])
def conversation_delete(request, pk: int):
    conversation = _get_conversation_for_user(request, pk)
    if request.method == "GET":
        return render(request, "chat/confirm_delete.html", {"conversation": conversation})
    services.conversation_delete(conversation=conversation)
    if request.htmx:
        current = request.htmx.current_url_abs_path or ""
        if current.startswith(reverse("chat:conversation", args=[pk])):
            return HttpResponseClientRedirect(reverse("home"))
        return HttpResponse("")
    return redirect("home")


@require_POST
def message_send(request, pk: int):
    """The no-JavaScript way to chat: save, answer without streaming, show the page again."""
    conversation = _get_conversation_for_user(request, pk)
    content = request.POST.get("content", "")
    return _answer_and_show(
        request,
        pk,
        lambda: _send(user=request.user, conversation=conversation, content=content),
    )


@require_POST
def message_retry(request, pk: int):
    """The no-JavaScript Retry of a failed or stopped answer, answered without streaming."""
    reply = _get_reply_for_user(request, pk)
    return _answer_and_show(request, pk, lambda: services.message_retry(message=reply))


@require_POST
def message_continue(request, pk: int):
    """The no-JavaScript Continue of an answer cut short, written on without streaming."""
    reply = _get_reply_for_user(request, pk)
    return _answer_and_show(request, pk, lambda: services.message_continue(message=reply))


@require_POST
def message_edit(request, pk: int):
    """The no-JavaScript Edit of a turn whose answer failed: the turn goes, and its message
    comes back into the composer."""
    reply = _get_reply_for_user(request, pk)
    try:
        content = services.message_withdraw(message=reply)
    except services.ChatError as exc:
        messages.error(request, str(exc))
    else:
        request.session[DRAFT_KEY] = {"conversation": pk, "content": content, "send": False}
    return redirect("chat:conversation", pk=pk)


@require_POST
def message_revise(request, pk: int):
    """The no-JavaScript Edit of one of the user's messages: a new branch, answered without
    streaming."""
    message = _get_reply_for_user(request, pk)
    content = request.POST.get("content", "")
    return _answer_and_show(
        request,
        pk,
        lambda: branching.message_edit(user=request.user, message=message, content=content).reply,
    )


@require_POST
def message_regenerate(request, pk: int):
    """The no-JavaScript Regenerate of an answer: a new branch, answered without streaming."""
    reply = _get_reply_for_user(request, pk)
    return _answer_and_show(request, pk, lambda: services.message_regenerate(message=reply))


@require_POST
def message_delete(request, pk: int):
    """Delete one of the user's messages and what follows it (Delete under the message)."""
    message = _get_reply_for_user(request, pk)
    try:
        forgot = branching.message_delete(message=message)
    except services.ChatError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, branching.deleted_notice(forgot))
        broadcasts.branch_changed(conversation=message.conversation)
    return redirect("chat:conversation", pk=pk)


@require_POST
def branch_show(request, pk: int):
    """Show another version of a message (‹ k / n ›) and the branch that follows it."""
    message = _get_reply_for_user(request, pk)
    try:
        services.branch_show(message=message)
    except services.ChatError as exc:
        messages.error(request, str(exc))
    else:
        # The conversation's other open pages show it too.
        broadcasts.branch_changed(conversation=message.conversation)
    return redirect(f"{reverse('chat:conversation', args=[pk])}#msg-{message.pk}")


def _get_reply_for_user(request, pk: int) -> Message:
    """The message the form names, in the user's conversation `pk`."""
    conversation = _get_conversation_for_user(request, pk)
    message_id = request.POST.get("message_id", "")
    reply = message_of(
        conversation=conversation, message_id=int(message_id) if message_id.isdigit() else None
    )
    if reply is None:
        raise Http404("No such answer.")
    return reply


def _answer_and_show(request, pk: int, open_reply: Callable[[], Message]):
    """Open a reply (a send, a retry, a continue), answer it without streaming, show the page
    again; a refusal (busy, too fast, too long) is shown there as a sentence."""
    try:
        reply = open_reply()
    except services.ChatError as exc:
        messages.error(request, str(exc))
    else:
        async_to_sync(_drain)(reply.pk, reply.conversation_id)
    return redirect("chat:conversation", pk=pk)


async def _drain(reply_id: int, conversation_id: int) -> None:
    # Registered as the socket's replies are, so a Stop from any page or process reaches it.
    await stops.listen_for_stops()
    task = asyncio.ensure_future(_answer(reply_id))
    stops.reply_running(reply_id=reply_id, conversation_id=conversation_id, task=task)
    try:
        await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise
        # Stopped: the answer so far is saved as cancelled, and the page shows it.


async def _answer(reply_id: int) -> None:
    try:
        async for _ in answer_saved_reply(reply_id=reply_id):
            pass
    except AnswerFailed:
        pass


@require_POST
def message_stop(request, pk: int):
    """The no-JavaScript Stop: the answer stops wherever it is being written."""
    reply = _get_reply_for_user(request, pk)
    async_to_sync(stops.reply_stop)(reply_id=reply.pk, conversation_id=pk)
    # The page fails a reply that no process writes any more (conversation_detail).
    return redirect("chat:conversation", pk=pk)


@require_GET
def message_used(request, pk: int, message_id: int):
    """The "What I used" panel of one answer, drawn when a page opens it (pushed answers carry
    an empty one). Without htmx: the conversation, where every panel is drawn."""
    conversation = _get_conversation_for_user(request, pk)
    reply = message_of(conversation=conversation, message_id=message_id)
    if reply is None or reply.role != Message.Role.ASSISTANT:
        raise Http404("No such answer.")
    if not request.htmx:
        return redirect(f"{reverse('chat:conversation', args=[pk])}#msg-{reply.pk}")
    return render(request, "chat/_trace_body.html", {"message": reply})


# The receipt under an answer corrects memory with the memory browser's own services.


def _get_node_for_user(request, node_id: int) -> MemoryNode:
    node = browser_selectors.memory_node_for_user(user=request.user, pk=node_id)
    if node is None:
        raise Http404("No such memory.")
    return node


def _receipt_after_change(request, pk: int, reply: Message):
    """The answer's receipt again, open: swapped in by htmx, pushed to the other open pages."""
    # Forgetting a memory also takes it out of the traces of the answers that used it.
    reply.refresh_from_db(fields=["trace"])
    broadcasts.receipt_changed(message_id=reply.pk)
    if not request.htmx:
        return redirect(f"{reverse('chat:conversation', args=[pk])}#msg-{reply.pk}")
    html = render_to_string(
        "chat/_receipt.html", {"message": reply, "receipt_open": True}, request=request
    )
    return HttpResponse(html)


@require_POST
def memory_confirm(request, pk: int, node_id: int):
    reply = _get_reply_for_user(request, pk)
    browser_services.memory_node_confirm(node=_get_node_for_user(request, node_id))
    return _receipt_after_change(request, pk, reply)


@require_POST
def memory_wrong(request, pk: int, node_id: int):
    reply = _get_reply_for_user(request, pk)
    browser_services.memory_node_mark_wrong(node=_get_node_for_user(request, node_id))
    return _receipt_after_change(request, pk, reply)


@require_POST
def memory_forget(request, pk: int, node_id: int):
    reply = _get_reply_for_user(request, pk)
    node = _get_node_for_user(request, node_id)
    browser_services.memory_nodes_forget(node_ids=[node.pk])
    return _receipt_after_change(request, pk, reply)
