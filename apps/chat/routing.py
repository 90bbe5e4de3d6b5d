from __future__ import annotations

from django.urls import path

from apps.chat.consumers import ChatConsumer

websocket_urlpatterns = [
    path("ws/c/<int:conversation_id>/", ChatConsumer.as_asgi()),
]
