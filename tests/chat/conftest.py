"""Helpers of the chat tests."""

from __future__ import annotations

import asyncio
import json

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


async def receive_until(communicator, needle: str, timeout: float = 10.0) -> list[str]:
    """The frames a socket receives up to the first that holds `needle`, that one included."""
    seen = []
    async with asyncio.timeout(timeout):
        while True:
            frame = await communicator.receive_from(timeout)
            seen.append(frame)
            if needle in frame:
                return seen


async def send_action(communicator, **data) -> None:
    """What the chat page's composer sends: `{"action": ..., ...}` as JSON."""
    await communicator.send_to(text_data=json.dumps(data))
