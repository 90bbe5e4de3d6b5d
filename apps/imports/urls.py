from __future__ import annotations

from django.urls import path

from apps.imports import views

app_name = "imports"

urlpatterns = [
    path("", views.import_page, name="page"),
    path("upload/", views.import_upload, name="upload"),
]
