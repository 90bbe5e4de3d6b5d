"""The import page's websocket: the owner's import progress bars, pushed after each batch."""

from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer

from apps.accounts.sockets import SIGNED_OUT_CLOSE_CODE, user_sockets_group
from apps.imports.services import import_group


class ImportConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        user = self.scope["user"]
        if not user.is_authenticated:
            await self.close(code=4401)
            return
        self.groups_joined = [import_group(user.pk), user_sockets_group(user.pk)]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def import_progress(self, event):
        await self.send(text_data=event["html"])

    async def session_ended(self, event):
        await self.close(code=SIGNED_OUT_CLOSE_CODE)
