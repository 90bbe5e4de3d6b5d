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

from apps.accounts.selectors import memory_enabled_for
from apps.chat import (
    branch_services,
    broadcasts,
    conversation_services,
    open_replies,
    services,
    stops,
)
from apps.chat.models import Conversation, Message
from apps.chat.selectors import (
    VIA_FILTERS,
    conversation_for_user,
    conversations_for_user,
    message_of,
    messages_of,
)
from apps.cognition import branching, remembering
from apps.cognition.answer import AnswerFailed
from apps.cognition.message_room import message_room
from apps.cognition.pipeline import answer_saved_reply
from apps.core.llm.chat_models import chat_models, picked_chat_model
from apps.core.selectors import runtime_config
from apps.memory import browser_selectors, browser_services, undo_services
from apps.memory.models import MemoryNode

PAGE_SIZE = 30
# Text for the conversation page's composer: the home composer's first message, which the page
# sends over its socket ("send"), or the message of a failed turn taken back to be edited.
DRAFT_KEY = "chat_draft"
# The Undo notice of a receipt's Wrong or Forget, carried over the no-JavaScript redirect.
UNDO_KEY = "chat_undo"


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
            "memory_on": memory_enabled_for(user_id=request.user.pk),
        },
    )


@require_GET
def conversation_detail(request, pk: int):
    conversation = _get_conversation_for_user(request, pk)
    # A reply left open by a process that died is shown failed, with Retry.
    open_reply = open_replies.live_open_reply(conversation=conversation)
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
            "undo": request.session.pop(UNDO_KEY, None),
            "memory_on": memory_enabled_for(user_id=request.user.pk),
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
    conversation = conversation_services.conversation_start(user=request.user, temporary=temporary)
    return redirect("chat:conversation", pk=conversation.pk)


@require_POST
def conversation_begin(request):
    """The home page's composer: typing starts a conversation. With a script (`live`), the
    conversation page sends the message over its socket, where the answer streams and can be
    stopped; without one it is answered here, as `message_send` does."""
    content = request.POST.get("content", "")
    if not content.strip():
        return redirect("home")
    conversation = conversation_services.conversation_start(user=request.user)
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
    conversation_services.conversation_rename(
        conversation=conversation, title=request.POST.get("title", "")
    )
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
    conversation_services.conversation_model_pick(
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
    conversation_services.conversation_delete(conversation=conversation)
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
        branch_services.branch_show(message=message)
    except services.ChatError as exc:
        messages.error(request, str(exc))
    else:
        # The conversation's other open pages show it too.
        broadcasts.branch_changed(conversation=message.conversation)
    return redirect(f"{reverse('chat:conversation', args=[pk])}#msg-{message.pk}")


def _get_reply_for_user(request, pk: int) -> Message:
    """The message the form names, in the user's conversation `pk`."""
    conversation = _get_conversation_for_user(request, pk)
    # A receipt's form sends it; an Undo notice's, which the memory browser shares, in its URL.
    message_id = request.POST.get("message_id") or request.GET.get("message_id", "")
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


def _receipt_after_change(
    request, pk: int, reply: Message, undo: dict | None = None, *, undone: bool = False
):
    """The answer's receipt again, open: swapped in by htmx, pushed to the other open pages.

    `undo` is the notice after a Confirm, a Wrong, a Forget or their Undo (the memory
    browser's memory/_undo.html, timed by memory.js), drawn out of band.
    """
    # Forgetting a memory also takes it out of the traces of the answers that used it.
    reply.refresh_from_db(fields=["trace"])
    broadcasts.receipt_changed(message_id=reply.pk)
    if not request.htmx:
        if undo is not None:
            request.session[UNDO_KEY] = undo
        return redirect(f"{reverse('chat:conversation', args=[pk])}#msg-{reply.pk}")
    # An Undo's form (in the notice) swaps nothing in place: the receipt comes out of band.
    context = {"message": reply, "receipt_open": True, "oob": undone}
    html = render_to_string("chat/_receipt.html", context, request=request)
    if undo is not None:
        html += render_to_string("memory/_undo.html", {"undo": undo, "oob": True}, request=request)
    return HttpResponse(html)


def _undo_offer(reply: Message, node: MemoryNode, *, forgotten: bool) -> dict:
    """The notice after a receipt's Wrong or Forget: its Undo posts back here, so the receipt
    lists the memory again; a Forget's notice running out finishes it as the browser's does."""
    action = "forget" if forgotten else "wrong"
    undo_url = reverse(f"chat:memory_{action}_undo", args=[reply.conversation_id, node.pk])
    offer = {
        "said": "Forgotten" if forgotten else "Marked wrong",
        "text": node.description,
        "undo_url": f"{undo_url}?message_id={reply.pk}",
        "seconds": undo_services.UNDO_SECONDS,
    }
    if forgotten:
        offer["finish_url"] = reverse("memory:forget_now", args=[node.pk])
    return offer


@require_POST
def memory_confirm(request, pk: int, node_id: int):
    reply = _get_reply_for_user(request, pk)
    node = _get_node_for_user(request, node_id)
    said = browser_services.confirmed_words(node)
    node = browser_services.memory_node_confirm(node=node)
    return _receipt_after_change(request, pk, reply, {"said": said, "text": node.description})


@require_POST
def proposal_confirm(request, pk: int, index: int):
    """The receipt's Update: a new value of a fact the user stated once replaces the old one."""
    reply = _get_reply_for_user(request, pk)
    node = remembering.proposal_confirm(reply=reply, index=index)
    # None: settled already (a second click); the receipt shows how it stands.
    notice = {"said": "Updated", "text": node.description} if node is not None else None
    return _receipt_after_change(request, pk, reply, notice)


@require_POST
def memory_wrong(request, pk: int, node_id: int):
    reply = _get_reply_for_user(request, pk)
    node = browser_services.memory_node_mark_wrong(node=_get_node_for_user(request, node_id))
    return _receipt_after_change(request, pk, reply, _undo_offer(reply, node, forgotten=False))


@require_POST
def memory_forget(request, pk: int, node_id: int):
    """Forget one memory at once for every answer, and for good once its Undo has passed."""
    reply = _get_reply_for_user(request, pk)
    node = undo_services.memory_node_forget_soon(node=_get_node_for_user(request, node_id))
    return _receipt_after_change(request, pk, reply, _undo_offer(reply, node, forgotten=True))


def _undone(request, pk: int, node_id: int, take_back: Callable, said: str):
    reply = _get_reply_for_user(request, pk)
    node = _get_node_for_user(request, node_id)
    try:
        take_back(node=node)
    except undo_services.CannotUndo as exc:
        undo = {"said": str(exc)}
    else:
        undo = {"said": said, "text": node.description}
    return _receipt_after_change(request, pk, reply, undo, undone=True)


@require_POST
def memory_wrong_undo(request, pk: int, node_id: int):
    return _undone(request, pk, node_id, undo_services.memory_node_unmark_wrong, "Back in use")


@require_POST
def memory_forget_undo(request, pk: int, node_id: int):
    return _undone(request, pk, node_id, undo_services.memory_node_unforget, "Kept")
