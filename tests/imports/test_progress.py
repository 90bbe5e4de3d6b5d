"""The import page shows each import's progress, and its socket pushes the bar after a batch."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.urls import reverse

from apps.imports import services
from apps.imports.routing import websocket_urlpatterns

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = pytest.mark.usefixtures("no_outbound_in_atomic")


def _export(count: int) -> bytes:
    return json.dumps(
        [
            {
                "id": f"w-{n}",
                "title": f"Chat {n}",
                "created_at": 1717236000,
                "chat": {"messages": [{"role": "user", "content": f"hi {n}", "timestamp": 1}]},
            }
            for n in range(count)
        ]
    ).encode()


def test_the_page_shows_the_progress_bar_with_its_counts(client, user):
    started, _ = services.import_start(user=user, data=_export(30), filename="webui.json")
    services.import_read_batch(import_id=started.pk)
    client.force_login(user)

    page = client.get(reverse("imports:page")).content.decode()

    assert f'id="import-{started.pk}"' in page
    assert '<progress max="100" value="33"' in page
    assert "20 of 30 conversations read" in page
    assert 'ws-connect="/ws/imports/"' in page


@pytest.mark.django_db(transaction=True)
async def test_each_batch_pushes_the_bar_to_the_owners_page_only(user, other_user):
    started, _ = await sync_to_async(services.import_start)(
        user=user, data=_export(30), filename="webui.json"
    )
    owner = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/imports/")
    owner.scope["user"] = user
    stranger = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/imports/")
    stranger.scope["user"] = other_user
    assert (await owner.connect())[0] and (await stranger.connect())[0]

    await sync_to_async(services.import_read_batch)(import_id=started.pk)

    frame = await owner.receive_from(5)
    assert f'id="import-{started.pk}"' in frame and "20 of 30 conversations read" in frame
    assert await stranger.receive_nothing(0.5)
    await owner.disconnect()
    await stranger.disconnect()


@pytest.mark.parametrize("page", ["memory:list", "settings"])
def test_the_memory_browser_and_settings_link_to_the_import_page(client, user, page):
    client.force_login(user)

    html = client.get(reverse(page)).content.decode()

    assert f'href="{reverse("imports:page")}"' in html
