from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import aclosing

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from apps.chat import broadcasts, services
from apps.chat.models import Conversation, Message
from apps.chat.selectors import conversation_for_user, open_reply
from apps.cognition.answer import AnswerFailed, answer_reply, memory_for_turn

logger = logging.getLogger(__name__)

# Replies being generated in this process, so a Stop from any page can cancel them.
RUNNING: dict[int, asyncio.Task] = {}
FLUSH_SECONDS = 0.03


class ChatConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        user = self.scope["user"]
        if not user.is_authenticated:
            await self.close(code=4401)
            return
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        self.conversation = await database_sync_to_async(conversation_for_user)(
            user=user, pk=conversation_id
        )
        if self.conversation is None:
            await self.close(code=4404)
            return
        self.groups_joined = [
            broadcasts.conversation_group(self.conversation.pk),
            broadcasts.user_group(user.pk),
        ]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        try:
            data = json.loads(text_data or "{}")
        except ValueError:
            return
        action = data.get("action", "send")
        if action == "send":
            await self._send_message(str(data.get("content", "")))
        elif action == "stop":
            await self.channel_layer.group_send(
                broadcasts.conversation_group(self.conversation.pk),
                {"type": "chat.cancel", "message_id": _int(data.get("message_id"))},
            )
        elif action == "retry":
            await self._retry(_int(data.get("message_id")))

    async def _send_message(self, content: str) -> None:
        # Recall what the memory knows while the message is being saved: both need only the
        # text, and the embedding call is the slowest step before the answer can start.
        memory = asyncio.ensure_future(
            database_sync_to_async(memory_for_turn, thread_sensitive=False)(
                user=self.scope["user"], conversation=self.conversation, text=content.strip()
            )
        )
        try:
            user_message, reply = await database_sync_to_async(
                services.message_send, thread_sensitive=False
            )(conversation=self.conversation, content=content)
        except services.ChatError as exc:
            memory.cancel()
            await self.send(text_data=broadcasts.render_error(str(exc)))
            return
        group = broadcasts.conversation_group(self.conversation.pk)
        await broadcasts.push(
            group,
            broadcasts.render_new_messages([user_message, reply])
            + broadcasts.render_composer(self.conversation, reply)
            + broadcasts.render_error(""),
        )
        start_reply(self.conversation, reply.pk, memory)

    async def _retry(self, message_id: int | None) -> None:
        message = await Message.objects.filter(
            pk=message_id, conversation=self.conversation
        ).afirst()
        if message is None:
            return
        try:
            message = await database_sync_to_async(services.message_retry)(message=message)
        except services.ChatError as exc:
            await self.send(text_data=broadcasts.render_error(str(exc)))
            return
        await broadcasts.push(
            broadcasts.conversation_group(self.conversation.pk),
            broadcasts.render_message(message)
            + broadcasts.render_composer(self.conversation, message),
        )
        start_reply(self.conversation, message.pk)

    async def chat_fragment(self, event):
        await self.send(text_data=event["html"])

    async def chat_cancel(self, event):
        task = RUNNING.get(event.get("message_id"))
        if task is not None:
            task.cancel()


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def start_reply(
    conversation: Conversation, reply_id: int, memory: asyncio.Future | None = None
) -> asyncio.Task:
    task = asyncio.create_task(stream_reply(conversation, reply_id, memory))
    RUNNING[reply_id] = task
    task.add_done_callback(lambda _: RUNNING.pop(reply_id, None))
    return task


async def stream_reply(
    conversation: Conversation, reply_id: int, memory: asyncio.Future | None = None
) -> None:
    """Generate a reply, pushing its growing text to every page showing the conversation."""
    group = broadcasts.conversation_group(conversation.pk)
    text = ""
    last_flush = 0.0
    try:
        # aclosing: a Stop that lands while pushing still closes the generator, which then
        # saves the partial answer as cancelled.
        async with aclosing(answer_reply(reply_id=reply_id, memory=memory)) as deltas:
            async for delta in deltas:
                text += delta
                now = time.monotonic()
                if now - last_flush >= FLUSH_SECONDS:
                    last_flush = now
                    await broadcasts.push(group, broadcasts.render_source(reply_id, text))
    except AnswerFailed:
        pass
    except asyncio.CancelledError:
        pass
    except Exception:
        logger.exception("reply %s failed unexpectedly", reply_id)
    finally:
        await asyncio.shield(_push_final(conversation, reply_id))


async def _push_final(conversation: Conversation, reply_id: int) -> None:
    reply = await Message.objects.filter(pk=reply_id).afirst()
    if reply is None:
        return
    if reply.is_open:
        # An unexpected error left it open; never leave a reply spinning forever.
        reply = await database_sync_to_async(services.message_finish)(
            message=reply,
            status=Message.Status.FAILED,
            content=reply.content,
            error="Something went wrong while answering.",
        )
    still_open = await database_sync_to_async(open_reply)(conversation=conversation)
    await broadcasts.push(
        broadcasts.conversation_group(conversation.pk),
        broadcasts.render_message(reply) + broadcasts.render_composer(conversation, still_open),
    )
