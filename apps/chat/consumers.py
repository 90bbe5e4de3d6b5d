from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import partial

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from apps.accounts.selectors import memory_enabled_for
from apps.accounts.sockets import SIGNED_OUT_CLOSE_CODE, user_sockets_group
from apps.chat import admission, branch_services, broadcasts, open_replies, services, stops
from apps.chat.models import Conversation, Message
from apps.chat.replying import start_reply
from apps.chat.selectors import conversation_for_user, message_of, open_reply
from apps.cognition.branching import deleted_notice, message_delete, message_edit
from apps.cognition.context import OwnSearch, turn_search_start
from apps.cognition.message_room import message_room
from apps.cognition.pipeline import TurnRun, start_turn
from apps.core.db import on_pool_thread
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

logger = logging.getLogger(__name__)

# RFC 6455's close code for a frame too big to process.
MESSAGE_TOO_BIG = 1009


class ChatConsumer(AsyncWebsocketConsumer):
    closed = False

    @property
    def max_chars(self) -> int:
        return self.config.max_message_chars

    async def dispatch(self, message):
        # Channels closes stale database connections on the shared sync thread before every
        # message, a thread hop each time, even for a fragment this socket skips. Every database
        # call here goes through on_pool_thread (Channels' database_sync_to_async), which does that
        # in its own thread.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self):
        user = self.scope["user"]
        if not user.is_authenticated:
            await self.close(code=4401)
            return
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        self.conversation, self.config = await on_pool_thread(_open_conversation)(
            user=user, pk=conversation_id
        )
        if self.conversation is None:
            await self.close(code=4404)
            return
        # Off (the user's setting, or a temporary chat): the message is not even embedded.
        self.remember = not self.conversation.temporary and await on_pool_thread(
            memory_enabled_for
        )(user_id=user.pk)
        self.groups_joined = [
            broadcasts.conversation_group(self.conversation.pk),
            broadcasts.user_group(user.pk),
            user_sockets_group(user.pk),
        ]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        # A reply this socket starts can then be stopped from a page on another web process.
        await stops.listen_for_stops()
        await self.accept()

    async def disconnect(self, code):
        self.closed = True
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        # uvicorn refuses larger frames itself (`up` passes --ws-max-size); this holds under any
        # server.
        if len((text_data or "").encode()) > settings.THALAMUS_WS_MAX_BYTES:
            await self.close(code=MESSAGE_TOO_BIG)
            return
        try:
            data = json.loads(text_data or "{}")
        except ValueError:
            return
        action = data.get("action", "send")
        if action == "send":
            await self._send_message(str(data.get("content", "")))
        elif action == "stop":
            message_id = _int(data.get("message_id"))
            # Straight to the generation when it runs in this process, else to the process
            # that runs it, whether or not a page of the conversation is open there.
            stopped_here = await stops.reply_stop(
                reply_id=message_id, conversation_id=self.conversation.pk
            )
            if not stopped_here:
                await self._fail_if_orphaned(message_id)
        elif action == "retry":
            await self._reopen(_int(data.get("message_id")), services.message_retry)
        elif action == "continue":
            await self._reopen(_int(data.get("message_id")), services.message_continue)
        elif action == "edit":
            await self._withdraw(_int(data.get("message_id")))
        elif action == "revise":
            await self._branch(
                _int(data.get("message_id")),
                partial(_revise, user=self.scope["user"], content=str(data.get("content", ""))),
            )
        elif action == "regenerate":
            await self._branch(_int(data.get("message_id")), services.message_regenerate)
        elif action == "branch":
            await self._branch(_int(data.get("message_id")), _show_branch)
        elif action == "delete":
            await self._branch(_int(data.get("message_id")), _delete)

    async def _send_message(self, content: str) -> None:
        # Recall what the memory knows while the message is being saved: both need only the
        # text. The embedding is the slowest step before the answer can start, so it goes out
        # first, from here, under the configuration of this socket's last turn (a change of
        # embedding model reaches it one turn late); the recall reads the configuration afresh.
        text = content.replace("\r\n", "\n").strip()
        run = None
        user_id = self.scope["user"].pk
        try:
            # A message over the turn limit, or beyond the user's streams, starts nothing.
            slot = admission.turn_admit(user_id=user_id, config=self.config)
        except services.ChatError as exc:
            await self.send(text_data=broadcasts.render_error(str(exc)))
            return
        try:
            # Else the save most likely refuses it.
            if self.remember and text and len(text) <= self.max_chars:
                # RecallBusy (a ChatError) when the recall's pools are full.
                own = turn_search_start(user_id=user_id, text=text, config=self.config)
                run = self._start(text, own)
            user_message, reply, history, config = await on_pool_thread(_save_message)(
                user=self.scope["user"], conversation=self.conversation, content=content
            )
        except services.ChatError as exc:
            admission.stream_slot_release(user_id=user_id, slot=slot)
            if run is not None:
                run.cancel()
            await self.send(text_data=broadcasts.render_error(str(exc)))
            return
        conversation = self.conversation
        self.config = config
        max_chars = self.max_chars
        if run is None:  # the limit was raised since this socket's last turn
            run = self._start(text)
        # The conversation's first message names it at once, on its pages: its title is asked
        # only once the user pauses (chat.tasks.title_conversation).
        named = not conversation.title and not getattr(conversation, "opening_words", None)
        if named:
            conversation.opening_words = user_message.content

        def opening() -> str:
            return (
                broadcasts.render_new_messages([user_message, reply])
                + broadcasts.render_turn_status(reply.pk, run.states)
                + broadcasts.render_composer(conversation, reply, max_chars=max_chars)
                + broadcasts.render_error("")
                + (
                    broadcasts.render_conversation_item(conversation)
                    + broadcasts.render_conversation_header(conversation)
                    if named
                    else ""
                )
            )

        start_reply(
            conversation,
            reply.pk,
            run.prepare(reply=reply, history=history),
            max_chars=max_chars,
            sender=self,
            opening=opening,
            run=run,
            release=partial(admission.stream_slot_release, user_id=user_id, slot=slot),
        )

    def _start(self, text: str, own: OwnSearch | None = None) -> TurnRun:
        """The turn's pipeline, started as the message arrives (apps/cognition/pipeline.py)."""
        return start_turn(
            user=self.scope["user"], conversation=self.conversation, text=text, own=own
        )

    async def _reopen(self, message_id: int | None, reopen: Callable[..., Message]) -> None:
        """Answer one of this conversation's replies again: a Retry, or a Continue from its
        text so far."""
        changed = await self._change_in_slot(message_id, reopen)
        if changed is None:
            return
        message, release = changed
        await broadcasts.push(
            broadcasts.conversation_group(self.conversation.pk),
            broadcasts.render_message(message)
            + broadcasts.render_composer(self.conversation, message, max_chars=self.max_chars),
            sender=self,
        )
        start_reply(
            self.conversation,
            message.pk,
            max_chars=self.max_chars,
            sender=self,
            text=message.content,
            release=release,
        )

    async def _change_in_slot(
        self, message_id: int | None, change: Callable[..., object]
    ) -> tuple[object, Callable[[], None]] | None:
        """Run `change` on one of this conversation's messages, holding one of the user's
        answer slots (what it opens is not a new turn, but an answer being written): its result
        and the slot's release, or None when the message is not here or the change is refused
        (the page is told why, and the slot released)."""
        message = await on_pool_thread(message_of)(
            conversation=self.conversation, message_id=message_id
        )
        if message is None:
            return None
        user_id = self.scope["user"].pk
        try:
            slot = admission.turn_admit(user_id=user_id, config=self.config, new_turn=False)
        except services.ChatError as exc:
            await self.send(text_data=broadcasts.render_error(str(exc)))
            return None
        release = partial(admission.stream_slot_release, user_id=user_id, slot=slot)
        try:
            result = await on_pool_thread(change)(message=message)
        except services.ChatError as exc:
            release()
            await self.send(text_data=broadcasts.render_error(str(exc)))
            return None
        return result, release

    async def _branch(
        self, message_id: int | None, change: Callable[..., Message | str | None]
    ) -> None:
        """Change the branch shown: an edit or a regeneration (`change` returns the reply to
        write, answered as a Retry is), a switch to another branch (it returns None) or a
        deletion (it returns what to tell the user). Every open page of the conversation shows
        the new branch."""

        def change_and_show(*, message: Message) -> tuple[Message | str | None, str]:
            return change(message=message), broadcasts.render_branch(self.conversation)

        changed = await self._change_in_slot(message_id, change_and_show)
        if changed is None:
            return
        (reply, shown), release = changed
        await broadcasts.push(
            broadcasts.conversation_group(self.conversation.pk),
            shown
            + broadcasts.render_composer(
                self.conversation,
                reply if isinstance(reply, Message) else None,
                max_chars=self.max_chars,
            )
            + broadcasts.render_error(""),
            sender=self,
        )
        if not isinstance(reply, Message):
            # A switch, or a deletion (which says what memory forgot).
            release()
            if reply:
                await self.send(text_data=broadcasts.render_notice(reply))
            return
        start_reply(
            self.conversation,
            reply.pk,
            max_chars=self.max_chars,
            sender=self,
            release=release,
        )

    async def _withdraw(self, message_id: int | None) -> None:
        """Edit the message of a failed answer: the turn leaves every open page, and its text
        comes back into this page's composer."""
        message = await on_pool_thread(message_of)(
            conversation=self.conversation, message_id=message_id
        )
        if message is None:
            return
        try:
            content = await on_pool_thread(services.message_withdraw)(message=message)
        except services.ChatError as exc:
            await self.send(text_data=broadcasts.render_error(str(exc)))
            return
        await broadcasts.push(
            broadcasts.conversation_group(self.conversation.pk),
            broadcasts.render_removed([message.reply_to_id, message.pk]),
            sender=self,
        )
        await self.send(
            text_data=broadcasts.render_composer(
                self.conversation, None, max_chars=self.max_chars, draft=content
            )
            + broadcasts.render_error("")
        )

    async def _fail_if_orphaned(self, message_id: int | None) -> None:
        """A Stop for a reply no process is generating (it died) fails it, and shows Retry."""
        reply = await on_pool_thread(_fail_if_orphaned)(
            message_id=message_id, conversation=self.conversation
        )
        if reply is not None:
            await broadcasts.push(
                broadcasts.conversation_group(self.conversation.pk),
                broadcasts.render_message(reply)
                + broadcasts.render_composer(self.conversation, None, max_chars=self.max_chars),
                sender=self,
            )

    async def send_direct(self, html: str) -> bool:
        """Send a fragment straight to this socket; False once it is closed."""
        if self.closed:
            return False
        try:
            await self.send(text_data=html)
        except Exception:  # noqa: BLE001 — a socket that went away; the group still gets it.
            self.closed = True
            return False
        return True

    async def chat_fragment(self, event):
        if event.get("skip") == self.channel_name:
            return  # the sender already sent it straight to this socket
        await self.send(text_data=event["html"])

    async def session_ended(self, event):
        await self.close(code=SIGNED_OUT_CLOSE_CODE)


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _fail_if_orphaned(*, message_id: int | None, conversation: Conversation) -> Message | None:
    reply = open_reply(conversation=conversation)
    if reply is None or reply.pk != message_id:
        return None
    if not open_replies.message_fail_if_orphaned(reply_id=reply.pk, created_at=reply.created_at):
        return None
    reply.refresh_from_db()
    return reply


def _open_conversation(*, user, pk: int) -> tuple[Conversation | None, RuntimeConfig]:
    """The user's conversation (None if it is not theirs) and the runtime configuration."""
    return conversation_for_user(user=user, pk=pk), runtime_config()


def _revise(*, message: Message, user, content: str) -> Message:
    """Edit the user's message: a new branch, and its pending reply."""
    return message_edit(user=user, message=message, content=content).reply


def _show_branch(*, message: Message) -> None:
    branch_services.branch_show(message=message)


def _delete(*, message: Message) -> str:
    """Delete the user's message and what follows it; what memory forgot, as a sentence."""
    return deleted_notice(message_delete(message=message))


def _save_message(*, user, conversation: Conversation, content: str):
    """Save the message and its pending reply, and read the history the reply answers; a
    message the model has no room for is refused before it is saved."""
    config = runtime_config()
    sent = services.message_send(
        conversation=conversation,
        content=content,
        config=config,
        history=config.short_term_window,
        refusal=message_room(user=user, conversation=conversation, config=config).refusal,
    )
    return sent.question, sent.reply, sent.history, config
