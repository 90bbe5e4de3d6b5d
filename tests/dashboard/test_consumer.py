"""The dashboard websocket pushes what changed in one mind, and only that mind."""

from __future__ import annotations

import asyncio
import html
import json
import re

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from apps.dashboard.routing import websocket_urlpatterns
from apps.memory import browser_services, services

pytestmark = pytest.mark.django_db(transaction=True)


async def _connect(user, who: str = "me"):
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/mind/{who}/")
    communicator.scope["user"] = user
    connected, code = await communicator.connect()
    return communicator, connected, code


async def _frames_within(communicator, seconds: float) -> list[str]:
    """Every frame the socket receives in the next `seconds`."""
    frames = []
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0 or await communicator.receive_nothing(left):
            return frames
        frames.append(await communicator.receive_from())


def _delta(frame: str) -> dict:
    match = re.search(r'data-delta="([^"]*)"', frame)
    return json.loads(html.unescape(match.group(1)))


async def test_it_sends_the_graph_on_connect_and_changes_after_each_event(user, other_user):
    first = await sync_to_async(services.memory_node_create)(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    communicator, connected, _ = await _connect(user)
    assert connected
    frame = await communicator.receive_from(5)
    assert [node["id"] for node in _delta(frame)["nodes"]] == [first.pk]
    assert 'id="counter-volatile">1<' in frame

    second = await sync_to_async(browser_services.memory_node_add)(
        owner=user, description="Alice sells honey", source="admin"
    )
    await sync_to_async(services.memory_link_upsert)(
        source=second, target=first, kind="supports", score=0.9
    )
    await sync_to_async(browser_services.memory_nodes_promote)(node_ids=[first.pk])
    frames = []
    async with asyncio.timeout(5):
        while not any('counter-promoted">1<' in f for f in frames):
            frames.append(await communicator.receive_from(5))
    text = "".join(frames)
    assert "A memory was added by hand: Alice sells honey" in text
    changed = {node["id"]: node for f in frames for node in _delta(f)["nodes"]}
    assert changed[second.pk]["state"] == "volatile"
    assert changed[first.pk]["state"] == "promoted"
    assert any(edge["kind"] == "supports" for f in frames for edge in _delta(f)["edges"])

    await sync_to_async(browser_services.memory_nodes_forget)(node_ids=[second.pk])
    # An event announced as a refresh read gets a refresh of its own, which may come first.
    removed = []
    async with asyncio.timeout(5):
        while not removed:
            removed = _delta(await communicator.receive_from(5))["removed_nodes"]
    assert removed == [second.pk]

    await sync_to_async(browser_services.memory_node_add)(
        owner=other_user, description="Mallory", source="admin"
    )
    # Such a late refresh of this mind's may come here too; nothing of the other mind does.
    late = await _frames_within(communicator, 0.5)
    assert not any("Mallory" in frame for frame in late)
    assert not any(_delta(frame)["nodes"] for frame in late)
    await communicator.disconnect()


async def test_a_user_cannot_watch_another_mind(user, other_user):
    communicator, connected, code = await _connect(user, str(other_user.pk))
    assert not connected and code == 4404
    communicator, connected, code = await _connect(user, "global")
    assert not connected and code == 4404


async def test_expand_raises_the_graph_cap(user, monkeypatch):
    from apps.dashboard import selectors

    monkeypatch.setattr(selectors, "GRAPH_LIMIT", 2)
    for n in range(5):
        await sync_to_async(services.memory_node_create)(
            owner=user, description=f"memory {n}", embed=False, source="admin"
        )
    communicator, connected, _ = await _connect(user)
    delta = _delta(await communicator.receive_from(5))
    assert len(delta["nodes"]) == 2 and delta["truncated"]
    await communicator.send_to(text_data=json.dumps({"action": "expand", "HEADERS": {}}))
    delta = _delta(await communicator.receive_from(5))
    assert len(delta["nodes"]) == 2 and delta["limit"] == 4
    await communicator.disconnect()
