from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from apps.core import views as core_views

urlpatterns = [
    path("", core_views.home, name="home"),
    path("healthz", core_views.healthz, name="healthz"),
    path("accounts/", include("apps.accounts.urls")),
    path("admin/", admin.site.urls),
]
