from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from apps.chat import views as chat_views
from apps.core import views as core_views

urlpatterns = [
    path("", chat_views.home, name="home"),
    path("c/", include("apps.chat.urls")),
    path("memory/", include("apps.memory.urls")),
    path("dashboard/", include("apps.dashboard.urls")),
    path("healthz", core_views.healthz, name="healthz"),
    path("accounts/", include("apps.accounts.urls")),
    path("v1/", include("apps.api.urls")),
    path("admin/", admin.site.urls),
]
