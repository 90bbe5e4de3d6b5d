from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from apps.chat import views as chat_views
from apps.core import views as core_views
from apps.core.admin import llm_metrics_view

urlpatterns = [
    path("", chat_views.home, name="home"),
    path("c/", include("apps.chat.urls")),
    path("memory/", include("apps.memory.urls")),
    path("dashboard/", include("apps.dashboard.urls")),
    path("import/", include("apps.imports.urls")),
    path("healthz", core_views.healthz, name="healthz"),
    path("demo-banner/dismiss/", core_views.demo_banner_dismiss, name="demo_banner_dismiss"),
    path("metrics", core_views.metrics, name="metrics"),
    path("accounts/", include("apps.accounts.urls")),
    path("v1/", include("apps.api.urls")),
    # Before the admin's own URLs, whose app pattern would take it for an app's.
    path("admin/llm-metrics/", admin.site.admin_view(llm_metrics_view), name="llm_metrics"),
    path("admin/", admin.site.urls),
]
