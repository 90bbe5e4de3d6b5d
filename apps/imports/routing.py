from __future__ import annotations

from django.urls import path

from apps.imports.consumers import ImportConsumer

websocket_urlpatterns = [
    path("ws/imports/", ImportConsumer.as_asgi()),
]
