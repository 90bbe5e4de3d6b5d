from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from apps.core.health import system_health


@require_GET
@never_cache
@login_not_required
def healthz(request):
    healthy, report = system_health()
    return JsonResponse(report, status=200 if healthy else 503)
