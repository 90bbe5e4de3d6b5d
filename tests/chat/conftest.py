"""Helpers of the chat tests."""

from __future__ import annotations

from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from apps.chat.routing import websocket_urlpatterns


async def connect_socket(user, conversation_id: int) -> WebsocketCommunicator:
    """A chat websocket on the conversation, as `user`, connected."""
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/c/{conversation_id}/"
    )
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator
