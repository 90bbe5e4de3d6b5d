"""The live dashboard's websocket: joined to one mind's group, it pushes what changed.

Every `mind.event` (announced after commit by `event_record`) schedules one refresh; events that
arrive within REFRESH_DELAY share it, so a burst of background work costs one set of queries.
A refresh sends the new stream items, the counters and the graph's changes since the last push,
as HTML fragments that the htmx websocket extension swaps in by id.
"""

from __future__ import annotations

import asyncio
import json
import logging

from channels.generic.websocket import AsyncWebsocketConsumer

from apps.accounts.sockets import SIGNED_OUT_CLOSE_CODE, user_sockets_group
from apps.core.db import on_pool_thread
from apps.dashboard import selectors
from apps.dashboard.rendering import render_refresh

logger = logging.getLogger(__name__)

REFRESH_DELAY = 0.1


class MindConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        user = self.scope["user"]
        if not user.is_authenticated:
            await self.close(code=4401)
            return
        who = self.scope["url_route"]["kwargs"]["who"]
        self.mind = await on_pool_thread(selectors.mind_scope_for)(user=user, who=who)
        if self.mind is None:
            await self.close(code=4404)
            return
        self.last_event_id = _after_from_query(self.scope.get("query_string", b""))
        self.graph = selectors.EMPTY_GRAPH
        self.graph_limit = selectors.GRAPH_LIMIT
        self.pending: asyncio.Task | None = None
        self.stale = False
        await self.channel_layer.group_add(self.mind.group, self.channel_name)
        await self.channel_layer.group_add(user_sockets_group(user.pk), self.channel_name)
        await self.accept()
        # The page carries counters and events; the graph arrives here, so it is never stale.
        await self.refresh()

    async def disconnect(self, code):
        mind = getattr(self, "mind", None)
        if mind is not None:
            await self.channel_layer.group_discard(mind.group, self.channel_name)
            await self.channel_layer.group_discard(
                user_sockets_group(self.scope["user"].pk), self.channel_name
            )
        if getattr(self, "pending", None) is not None:
            self.pending.cancel()

    async def receive(self, text_data=None, bytes_data=None):
        try:
            data = json.loads(text_data or "{}")
        except ValueError:
            return
        if data.get("action") == "expand":
            self.graph_limit = min(self.graph_limit * 2, selectors.GRAPH_LIMIT_MAX)
            await self.refresh()

    async def session_ended(self, event):
        await self.close(code=SIGNED_OUT_CLOSE_CODE)

    async def mind_event(self, event):
        # An event announced while a refresh reads may have committed after it read: it gets
        # a refresh of its own.
        self.stale = True
        if self.pending is None or self.pending.done():
            self.pending = asyncio.create_task(self._refresh_soon())

    async def _refresh_soon(self):
        while self.stale:
            await asyncio.sleep(REFRESH_DELAY)
            self.stale = False
            try:
                await self.refresh()
            except Exception:
                logger.exception("dashboard refresh failed")

    async def refresh(self):
        html, self.graph, self.last_event_id = await on_pool_thread(render_refresh)(
            scope=self.mind,
            graph_before=self.graph,
            graph_limit=self.graph_limit,
            after_event_id=self.last_event_id,
        )
        await self.send(text_data=html)


def _after_from_query(query_string: bytes) -> int:
    from urllib.parse import parse_qs

    values = parse_qs(query_string.decode("latin-1")).get("after", ["0"])
    return int(values[0]) if values[0].isdigit() else 0
