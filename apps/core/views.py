from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from apps.core.health import system_health
from apps.core.metrics import METRICS_CONTENT_TYPE, metrics_text


@require_GET
@never_cache
@login_not_required
def healthz(request):
    healthy, report = system_health()
    return JsonResponse(report, status=200 if healthy else 503)


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
