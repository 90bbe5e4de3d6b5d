from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from apps.core.context_processors import DEMO_BANNER_COOKIE
from apps.core.health import system_health
from apps.core.metrics import METRICS_CONTENT_TYPE, metrics_text


@require_POST
@login_not_required
def demo_banner_dismiss(request):
    """The demo banner's ×: kept hidden in this browser for a year (a cookie, so the page is
    drawn without it), then back to the page it was pressed on."""
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        back = reverse("home")
    response = redirect(back)
    response.set_cookie(
        DEMO_BANNER_COOKIE,
        "1",
        max_age=365 * 24 * 3600,
        samesite="Lax",
        secure=request.is_secure(),
        httponly=True,
    )
    return response


@require_GET
@never_cache
@login_not_required
def healthz(request):
    """Every component's state for staff or THALAMUS_HEALTH_TOKEN; to anyone else only "ok"
    or "degraded" (versions, host names and the LLM's address are not theirs to know)."""
    refusal = _bearer_refusal(request, settings.THALAMUS_HEALTH_TOKEN, "health")
    if refusal is not None:
        return refusal
    healthy, report = system_health()
    status = 200 if healthy else 503
    if not (_has_bearer(request) or request.user.is_staff):
        everything_ok = all(part["ok"] for part in report.values() if isinstance(part, dict))
        return JsonResponse({"status": "ok" if everything_ok else "degraded"}, status=status)
    return JsonResponse(report, status=status)


def _has_bearer(request) -> bool:
    return request.headers.get("Authorization", "").partition(" ")[0].lower() == "bearer"


def _bearer_refusal(request, expected: str, name: str) -> HttpResponse | None:
    """403 for a bearer token that is not `expected`; None for the right one or none at all."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    if expected and hmac.compare_digest(token.strip().encode(), expected.encode()):
        return None
    return HttpResponse(f"Wrong {name} token.\n", status=403, content_type="text/plain")


@require_GET
@never_cache
@login_not_required
def metrics(request):
    """The LLM metrics in the Prometheus text format, for staff or THALAMUS_METRICS_TOKEN."""
    refusal = _metrics_refusal(request)
    if refusal is not None:
        return refusal
    return HttpResponse(metrics_text(), content_type=METRICS_CONTENT_TYPE)


def _metrics_refusal(request) -> HttpResponse | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        expected = settings.THALAMUS_METRICS_TOKEN
        if expected and hmac.compare_digest(token.strip().encode(), expected.encode()):
            return None
        return HttpResponse("Wrong metrics token.\n", status=403, content_type="text/plain")
    if request.user.is_authenticated:
        if request.user.is_staff:
            return None
        return HttpResponse("Staff only.\n", status=403, content_type="text/plain")
    response = HttpResponse(
        "Log in as staff, or send Authorization: Bearer <THALAMUS_METRICS_TOKEN>.\n",
        status=401,
        content_type="text/plain",
    )
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response
