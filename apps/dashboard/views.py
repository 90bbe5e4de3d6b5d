from __future__ import annotations

from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from apps.accounts.models import AdminViewing
from apps.accounts.services import admin_viewing_record
from apps.core.selectors import runtime_config
from apps.dashboard import selectors
from apps.dashboard.selectors import MindScope


def _get_scope_for_user(request, who: str) -> MindScope:
    scope = selectors.mind_scope_for(user=request.user, who=who)
    if scope is None:
        raise Http404("No such dashboard.")
    return scope


def _page(request, who: str):
    scope = _get_scope_for_user(request, who)
    # Staff watching another user's mind: that user is told (their settings page).
    admin_viewing_record(
        viewer=request.user, owner_ids={scope.owner_id}, place=AdminViewing.Place.MIND
    )
    events = selectors.mind_events(scope=scope)
    return render(
        request,
        "dashboard/dashboard.html",
        {
            "mind": scope,
            "counters": selectors.mind_counters(scope=scope),
            "writes": selectors.memory_write_rates(owner_id=scope.owner_id),
            "all_users": scope.owner_id is None,
            "events": events,
            "last_event_id": events[0].pk if events else 0,
            "kinds": list(selectors.KIND_WORDS.items()),
            "users": selectors.watchable_users(user=request.user),
            "quiet_seconds": runtime_config().reflection_quiet_seconds,
        },
    )


@require_GET
def dashboard_mine(request):
    return _page(request, "me")


@require_GET
def dashboard_global(request):
    return _page(request, "global")


@require_GET
def dashboard_user(request, user_id: int):
    return _page(request, str(user_id))


@require_GET
def dashboard_switch(request):
    who = request.GET.get("who", "me")
    scope = _get_scope_for_user(request, who)
    if scope.who == "me":
        return redirect("dashboard:mine")
    if scope.who == "global":
        return redirect("dashboard:global")
    return redirect("dashboard:user", user_id=scope.owner_id)


@require_GET
def node_detail(request, pk: int):
    node = selectors.node_for_viewer(user=request.user, pk=pk)
    if node is None:
        raise Http404("No such memory.")
    admin_viewing_record(
        viewer=request.user, owner_ids={node.owner_id}, place=AdminViewing.Place.MIND
    )
    critiques = list(node.critiques.all()[:20]) if hasattr(node, "critiques") else []
    return render(
        request,
        "dashboard/_node_detail.html",
        {
            "node": node,
            "critiques": critiques,
            "neighbours": selectors.node_neighbours(node=node),
        },
    )
