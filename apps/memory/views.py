"""The memory browser: what the assistant believes about you, and how to correct it.

Every read (browser_selectors) and write (browser_services, export_services) is for
`request.user`; another user's row is a 404.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from pydantic import ValidationError

from apps.core.selectors import runtime_config
from apps.core.validation import UnreadableJSON, json_load, validation_problem
from apps.memory import (
    browser_selectors,
    browser_services,
    export_services,
    selectors,
    undo_services,
    world_services,
)
from apps.memory.embedding import EmbeddingError, get_embedder
from apps.memory.forget_services import ForgetReceipt
from apps.memory.forms import (
    ForgetAllForm,
    MemoryEditForm,
    MemoryFilterForm,
    MemoryImportForm,
    WorldStateForm,
)
from apps.memory.models import MemoryNode

PAGE_SIZE = 50
RECEIPT_KEY = "memory_forget_receipt"
UNDO_KEY = "memory_undo"
MAX_IMPORT_BYTES = 20 * 1024 * 1024


def _get_node_for_user(request, pk: int) -> MemoryNode:
    node = browser_selectors.memory_node_for_user(user=request.user, pk=pk)
    if node is None:
        raise Http404("No such memory.")
    return node


def _ids(request) -> list[int]:
    return [int(value) for value in request.POST.getlist("ids") if value.isdigit()]


def _memories_for(request, form: MemoryFilterForm) -> QuerySet[MemoryNode]:
    filters = form.cleaned_data if form.is_valid() else None
    similar = filters["similar"].strip() if filters else ""
    vector = None
    if similar:
        try:
            vector = get_embedder(timeout=10).embed([similar])[0]
        except EmbeddingError:
            messages.error(request, "Similarity search is unavailable: the embedder is down.")
    return browser_selectors.memories_for_browser(
        user=request.user, filters=filters, similar_to=vector
    )


@require_GET
def memory_list(request):
    form = MemoryFilterForm(request.GET)
    page = Paginator(_memories_for(request, form), PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    as_of = form.cleaned_data["as_of"] if form.is_valid() else None
    # An empty page under a filter is the filter's doing, not an empty memory.
    filtered = form.is_valid() and any(
        value not in (None, "") for name, value in form.cleaned_data.items() if name != "as_of"
    )
    context = {
        "form": form,
        "page": page,
        "query": query.urlencode(),
        "as_of": as_of,
        "filtered": filtered,
    }
    if request.htmx and request.htmx.target == "memory-list":
        return render(request, "memory/_list.html", context)
    receipt = request.session.pop(RECEIPT_KEY, None)
    context["receipt"] = ForgetReceipt(**receipt) if receipt else None
    context["undo"] = request.session.pop(UNDO_KEY, None)
    counts = browser_selectors.memory_counts_for_user(user=request.user)
    awaiting = browser_selectors.memories_awaiting_approval(user=request.user)
    context.update(counts=counts, awaiting=awaiting, decay_hours=runtime_config().decay_hours)
    return render(request, "memory/browser.html", context)


def _show_receipt(request, receipt: ForgetReceipt):
    """After a redirect, the memory browser shows what was forgotten."""
    request.session[RECEIPT_KEY] = receipt.as_dict()
    return redirect("memory:list")


def _row_or_redirect(request, node: MemoryNode | None):
    if request.htmx:
        if node is None or not node.is_current:
            return HttpResponse("")
        return render(request, "memory/_node.html", {"node": node})
    return redirect("memory:list")


@require_http_methods(["GET", "POST"])
def memory_edit(request, pk: int):
    node = _get_node_for_user(request, pk)
    form = MemoryEditForm(request.POST or None, instance=node)
    if request.method == "POST" and form.is_valid():
        node = browser_services.memory_node_edit(
            node=node, hold_if_instruction=True, **form.cleaned_data
        )
        if node.state == MemoryNode.State.QUARANTINED:
            messages.warning(
                request,
                "Saved, but it reads like an instruction to the assistant, so it waits for your "
                "approval under “Awaiting your approval”. Approve it if you meant it.",
            )
        else:
            messages.success(request, "Memory saved.")
        return redirect("memory:list")
    return render(request, "memory/edit.html", {"form": form, "node": node})


def _undo_offer(node: MemoryNode, *, forgotten: bool) -> dict:
    """What the Undo notice after a Wrong or a Forget says and where its buttons post."""
    action = "forget" if forgotten else "wrong"
    offer = {
        "said": "Forgotten" if forgotten else "Marked wrong",
        "text": node.description,
        "undo_url": reverse(f"memory:{action}_undo", args=[node.pk]),
        "seconds": undo_services.UNDO_SECONDS,
    }
    if forgotten:
        offer["finish_url"] = reverse("memory:forget_now", args=[node.pk])
    return offer


def _after_correction(request, undo: dict, *, refresh: bool = False):
    """The answer to Wrong, Forget and their Undo: with htmx, the row goes (an empty swap), the
    notice and the page's counts come out of band, and the list reads itself again
    (`memory-changed`); without, the memory browser shows the notice after a redirect."""
    if not request.htmx:
        # The session outlives a Forget's Undo: it keeps no copy of the forgotten text.
        request.session[UNDO_KEY] = {**undo, "text": ""} if "finish_url" in undo else undo
        return redirect("memory:list")
    counts = browser_selectors.memory_counts_for_user(user=request.user)
    response = render(request, "memory/_correction.html", {"undo": undo, "counts": counts})
    if refresh:
        # What came back belongs in the awaiting-approval section, which only the page draws.
        response["HX-Refresh"] = "true"
    else:
        response["HX-Trigger"] = "memory-changed"
    return response


@require_POST
def memory_forget(request, pk: int):
    """Forget one memory at once for every answer, and for good once its Undo has passed."""
    node = undo_services.memory_node_forget_soon(node=_get_node_for_user(request, pk))
    return _after_correction(request, _undo_offer(node, forgotten=True))


@require_POST
def memory_forget_now(request, pk: int):
    """The Undo notice ran out or was dismissed: the pending memory goes for good, and the
    receipt says what went with it."""
    node = _get_node_for_user(request, pk)
    receipt = undo_services.memory_node_forget_now(node_id=node.pk)
    if request.htmx:
        return render(request, "memory/_receipt.html", {"receipt": receipt})
    if receipt is None:
        return redirect("memory:list")
    return _show_receipt(request, receipt)


@require_POST
def memory_forget_undo(request, pk: int):
    node = _get_node_for_user(request, pk)
    try:
        undo_services.memory_node_unforget(node=node)
    except undo_services.CannotUndo as exc:
        return _after_correction(request, {"said": str(exc)})
    return _after_correction(
        request,
        {"said": "Kept", "text": node.description},
        refresh=node.state == MemoryNode.State.QUARANTINED,
    )


@require_POST
def memory_forget_many(request):
    mine = browser_selectors.memory_node_ids_for_user(user=request.user, ids=_ids(request))
    receipt = browser_services.memory_nodes_forget(node_ids=mine)
    return _show_receipt(request, receipt)


@require_POST
def memory_confirm(request, pk: int):
    node = _get_node_for_user(request, pk)
    said = browser_services.confirmed_words(node)
    node = browser_services.memory_node_confirm(node=node)
    if not request.htmx:
        return redirect("memory:list")
    # The row again, and a notice that says it worked (a Confirm changes little on the row).
    notice = {"said": said, "text": node.description}
    return HttpResponse(
        render_to_string("memory/_node.html", {"node": node}, request=request)
        + render_to_string("memory/_undo.html", {"undo": notice, "oob": True}, request=request)
    )


@require_POST
def memory_wrong(request, pk: int):
    node = browser_services.memory_node_mark_wrong(node=_get_node_for_user(request, pk))
    return _after_correction(request, _undo_offer(node, forgotten=False))


@require_POST
def memory_wrong_undo(request, pk: int):
    node = _get_node_for_user(request, pk)
    try:
        undo_services.memory_node_unmark_wrong(node=node)
    except undo_services.CannotUndo as exc:
        return _after_correction(request, {"said": str(exc)})
    return _after_correction(request, {"said": "Back in use", "text": node.description})


@require_GET
def knowledge(request):
    triples = browser_selectors.triples_for_user(user=request.user)
    episodes = browser_selectors.episodes_for_user(user=request.user)
    return render(
        request, "memory/knowledge.html", {"triples": triples[:500], "episodes": episodes[:200]}
    )


@require_POST
def knowledge_forget(request):
    triple_ids = [int(v) for v in request.POST.getlist("triples") if v.isdigit()]
    episode_ids = [int(v) for v in request.POST.getlist("episodes") if v.isdigit()]
    count = browser_services.triples_forget(owner=request.user, triple_ids=triple_ids)
    count += browser_services.episodes_forget(owner=request.user, episode_ids=episode_ids)
    messages.success(request, f"Forgot {count} item{'s' if count != 1 else ''}.")
    return redirect("memory:knowledge")


@require_GET
def memory_export(request):
    data = export_services.memories_export(owner=request.user)
    response = JsonResponse(data, json_dumps_params={"indent": 2, "ensure_ascii": False})
    stamp = timezone.localdate().isoformat()
    response["Content-Disposition"] = f'attachment; filename="thalamus-memories-{stamp}.json"'
    return response


@require_POST
def memory_import(request):
    form = MemoryImportForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose an export file to import.")
        return redirect("memory:list")
    upload = form.cleaned_data["file"]
    if upload.size > MAX_IMPORT_BYTES:
        messages.error(request, "That file is too large to import.")
        return redirect("memory:list")
    try:
        data = json_load(upload.read(), name="the file")
        if export_services.another_kind_of_object(data):
            messages.warning(
                request,
                "Nothing was imported: this file is not a memory export "
                "(a memory export is the JSON file Export downloads).",
            )
            return redirect("memory:list")
        receipt = export_services.memories_import(owner=request.user, data=data)
    except UnreadableJSON as exc:
        messages.error(
            request,
            f"Nothing was imported: {exc} (a memory export is the JSON file Export downloads).",
        )
        return redirect("memory:list")
    except ValidationError as exc:
        messages.error(
            request,
            f"Nothing was imported: in this memory export, {validation_problem(exc)}.",
        )
        return redirect("memory:list")
    # A file that held nothing taught nothing: that is worth a second look, not a success.
    (messages.success if receipt.holds_anything else messages.warning)(request, receipt.sentence)
    return redirect("memory:list")


@require_http_methods(["GET", "POST"])
def memory_forget_all(request):
    form = ForgetAllForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        receipt = browser_services.memories_forget_all_recorded(owner=request.user)
        return _show_receipt(request, receipt)
    return render(request, "memory/confirm_forget_all.html", {"form": form})


@require_http_methods(["GET", "POST"])
def world_state(request):
    """The user's world state, edited through the same operations the world modifier uses."""
    state = selectors.world_state_for(user_id=request.user.pk)
    form = WorldStateForm.for_state(state)
    saved = False
    if request.method == "POST":
        form = WorldStateForm(request.POST)
        if form.is_valid():
            change = world_services.world_apply(
                user_id=request.user.pk, ops=form.operations(), source="browser"
            )
            state = change.state
            for rejected in change.rejected:
                path = rejected["op"].get("path")
                form.add_error(path if path in form.fields else None, rejected["reason"])
            saved = not change.rejected
            if saved and not request.htmx:
                messages.success(request, "World state saved.")
                return redirect("memory:world")
            if saved:
                form = WorldStateForm.for_state(state)
    context = {"form": form, "state": state, "saved": saved}
    if request.htmx:
        return render(request, "memory/_world_form.html", context)
    return render(request, "memory/world.html", context)
