from __future__ import annotations

from django.urls import path

from apps.api import views

app_name = "api"

urlpatterns = [
    path("models", views.models, name="models"),
    path("chat/completions", views.chat_completions, name="chat_completions"),
]
