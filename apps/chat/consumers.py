from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from contextlib import aclosing
from functools import partial

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from apps.accounts.selectors import memory_enabled_for
from apps.accounts.sockets import SIGNED_OUT_CLOSE_CODE, user_sockets_group
from apps.chat import admission, broadcasts, services, stops
from apps.chat.models import Conversation, Message
from apps.chat.selectors import conversation_for_user, message_of, open_reply
from apps.cognition.answer import AnswerFailed, answer_reply
from apps.cognition.context import start_turn_embedding
from apps.cognition.debate import REVIEWING
from apps.cognition.pipeline import TurnRun, answer_saved_reply, start_turn
from apps.cognition.turn_request import PreparedTurn
from apps.core.db import on_pool_thread
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 0.03
# Beyond this many answers streaming in the process, each streams in proportionally fewer,
# larger fragments (every fragment is a frame to each page and a publish): a busy process spends
# its time on the turns still waiting for their first token, and pages still update several
# times a second.
STREAMS_AT_FULL_CADENCE = 10
# How often a streaming answer looks again whether a page besides the asking one shows its
# conversation (one that opens meanwhile gets the text from the next look on, and the end always).
LISTENERS_SECONDS = 1.0
# Pages show the new messages once the answer is requested, so rendering them never delays the
# request; a turn still preparing after this long (a slow embedding server) shows them anyway.
OPENING_LATEST_SECONDS = 0.05
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
                run = self._start(text, start_turn_embedding(text=text, config=self.config))
            user_message, reply, history, config = await on_pool_thread(_save_message)(
                conversation=self.conversation, content=content
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

        def opening() -> str:
            return (
                broadcasts.render_new_messages([user_message, reply])
                + broadcasts.render_turn_status(reply.pk, run.states)
                + broadcasts.render_composer(conversation, reply, max_chars=max_chars)
                + broadcasts.render_error("")
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

    def _start(self, text: str, embedded: Future | None = None) -> TurnRun:
        """The turn's pipeline, started as the message arrives (apps/cognition/pipeline.py)."""
        return start_turn(
            user=self.scope["user"], conversation=self.conversation, text=text, embedded=embedded
        )

    async def _reopen(self, message_id: int | None, reopen: Callable[..., Message]) -> None:
        """Answer one of this conversation's replies again: a Retry, or a Continue from its
        text so far."""
        message = await on_pool_thread(message_of)(
            conversation=self.conversation, message_id=message_id
        )
        if message is None:
            return
        user_id = self.scope["user"].pk
        try:
            # Not a new turn, but an answer being written: it takes one of the user's slots.
            slot = admission.turn_admit(user_id=user_id, config=self.config, new_turn=False)
        except services.ChatError as exc:
            await self.send(text_data=broadcasts.render_error(str(exc)))
            return
        try:
            message = await on_pool_thread(reopen)(message=message)
        except services.ChatError as exc:
            admission.stream_slot_release(user_id=user_id, slot=slot)
            await self.send(text_data=broadcasts.render_error(str(exc)))
            return
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
            release=partial(admission.stream_slot_release, user_id=user_id, slot=slot),
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
    if not services.message_fail_if_orphaned(reply_id=reply.pk, created_at=reply.created_at):
        return None
    reply.refresh_from_db()
    return reply


def _open_conversation(*, user, pk: int) -> tuple[Conversation | None, RuntimeConfig]:
    """The user's conversation (None if it is not theirs) and the runtime configuration."""
    return conversation_for_user(user=user, pk=pk), runtime_config()


def _save_message(*, conversation: Conversation, content: str):
    """Save the message and its pending reply, and read the history the reply answers."""
    config = runtime_config()
    sent = services.message_send(
        conversation=conversation,
        content=content,
        config=config,
        history=config.short_term_window,
    )
    return sent.question, sent.reply, sent.history, config


def start_reply(
    conversation: Conversation,
    reply_id: int,
    turn: Awaitable[PreparedTurn] | None = None,
    *,
    max_chars: int | None,
    sender: ChatConsumer | None = None,
    opening: Callable[[], str] | None = None,
    text: str = "",
    run: TurnRun | None = None,
    release: Callable[[], None] | None = None,
) -> asyncio.Task:
    task = asyncio.create_task(
        stream_reply(
            conversation,
            reply_id,
            turn,
            max_chars=max_chars,
            sender=sender,
            opening=opening,
            text=text,
            run=run,
            release=release,
        )
    )
    if release is not None:  # also when the task ends before the reply is saved
        task.add_done_callback(lambda _: release())
    stops.reply_running(reply_id=reply_id, conversation_id=conversation.pk, task=task)
    return task


async def stream_reply(
    conversation: Conversation,
    reply_id: int,
    turn: Awaitable[PreparedTurn] | None = None,
    *,
    max_chars: int | None,
    sender: ChatConsumer | None = None,
    opening: Callable[[], str] | None = None,
    text: str = "",
    run: TurnRun | None = None,
    release: Callable[[], None] | None = None,
) -> None:
    """Generate a reply, pushing its growing text to every page showing the conversation.

    The page that asked gets each fragment straight from `sender`, without the channel layer's
    round trip; every other page showing the conversation gets it through the group. `opening`
    renders what pages show before the first token (the new messages); it is rendered and pushed
    while the LLM thinks (or after OPENING_LATEST_SECONDS of preparing the turn, whichever comes
    first), and always before any text of the answer. `max_chars` is the message size limit,
    for the composer pushed at the end. `text` is the reply's text so far, which a Continue
    writes on from. `run` is the turn's pipeline: its status line (what each subsystem is
    doing) is shown with the opening and pushed as it changes once pages show the reply.
    """
    group = broadcasts.conversation_group(conversation.pk)
    opened: asyncio.Future | None = None
    # Until looked up, every page gets every fragment.
    others = True
    looked_up = -LISTENERS_SECONDS

    def look_up_listeners() -> None:
        nonlocal looked_up

        def found(lookup: asyncio.Future) -> None:
            nonlocal others
            if not lookup.cancelled() and lookup.exception() is None:
                others = lookup.result()

        looked_up = time.monotonic()
        lookup = asyncio.ensure_future(broadcasts.others_listening(group, sender))
        lookup.add_done_callback(found)

    async def push(html: str) -> None:
        if sender is not None and time.monotonic() - looked_up >= LISTENERS_SECONDS:
            look_up_listeners()
        await broadcasts.push(group, html, sender=sender, others=others)

    async def push_opening() -> None:
        html = opening() if opening is not None else ""
        if html:
            await broadcasts.push(group, html, sender=sender)

    def open_pages() -> asyncio.Future:
        # Scheduled, not run: the rendering happens once the request is on its way.
        nonlocal opened
        if opened is None:
            opened = asyncio.ensure_future(push_opening())
        return opened

    if run is not None:

        def status_changed(subsystem: str, state: str, text: str) -> None:
            # Before the opening the line waits: the opening carries it.
            if opened is not None and opened.done() and not shown:
                asyncio.ensure_future(push(broadcasts.render_turn_status(reply_id, run.states)))

        run.status = status_changed

    shown = False

    async def show_final(reply: Message | None = None) -> None:
        # The reply as saved goes to the pages before the background work it starts is queued.
        nonlocal shown
        shown = True
        if release is not None:
            # The user's stream slot is free before the page hears the answer ended: a message
            # sent as soon as it does must not find the slot still held.
            release()
        await asyncio.shield(
            _push_final(
                conversation,
                reply_id,
                max_chars=max_chars,
                sender=sender,
                opened=open_pages(),
                saved=reply,
            )
        )

    status_shown = False

    async def show_review() -> None:
        # The internal debate: no text comes until the draft is reviewed (and maybe rewritten).
        nonlocal status_shown
        status_shown = True
        await open_pages()
        await push(broadcasts.render_status(reply_id, REVIEWING))

    last_flush = 0.0
    if sender is not None:
        look_up_listeners()
    task = asyncio.current_task()
    opening_timer = asyncio.get_running_loop().call_later(OPENING_LATEST_SECONDS, open_pages)
    try:
        # aclosing: a Stop that lands while pushing still closes the generator, which then
        # saves the partial answer as cancelled.
        callbacks = {"on_request": open_pages, "on_saved": show_final, "on_review": show_review}
        if turn is None:
            answering = answer_saved_reply(reply_id=reply_id, **callbacks)
        else:
            answering = answer_reply(reply_id=reply_id, turn=turn, **callbacks)
        async with aclosing(answering) as deltas:
            async for delta in deltas:
                if task.cancelling():
                    # A Stop cancelled this task but its CancelledError was lost on the way:
                    # Python 3.11's asyncio.wait_for (redis-py writes through it) returns the
                    # result instead when the cancel meets a write that is just finishing.
                    raise asyncio.CancelledError
                text += delta
                now = time.monotonic()
                if now - last_flush >= _flush_seconds():
                    last_flush = now
                    await open_pages()
                    html = broadcasts.render_source(reply_id, text)
                    if status_shown:
                        status_shown = False
                        html += broadcasts.render_status(reply_id, "")
                    await push(html)
    except AnswerFailed:
        pass
    except asyncio.CancelledError:
        pass
    except Exception:
        logger.exception("reply %s failed unexpectedly", reply_id)
    finally:
        opening_timer.cancel()
        if not shown:  # stopped before the answer was asked for, or an unexpected error
            await show_final()


def _flush_seconds() -> float:
    return FLUSH_SECONDS * max(1.0, len(stops.RUNNING) / STREAMS_AT_FULL_CADENCE)


def _final_state(
    conversation: Conversation, reply_id: int, saved: Message | None
) -> tuple[Message | None, Message | None]:
    """The reply as saved, and whichever reply of the conversation is still open."""
    reply = saved or Message.objects.filter(pk=reply_id).first()
    if reply is None:
        return None, None
    if reply.is_open:
        # An unexpected error left it open; never leave a reply spinning forever.
        reply = services.message_finish(
            message=reply,
            status=Message.Status.FAILED,
            content=reply.content,
            error="Something went wrong while answering.",
        )
    return reply, open_reply(conversation=conversation)


async def _push_final(
    conversation: Conversation,
    reply_id: int,
    *,
    max_chars: int | None,
    sender: ChatConsumer | None = None,
    opened: asyncio.Future | None = None,
    saved: Message | None = None,
) -> None:
    if opened is not None:
        await asyncio.gather(opened, return_exceptions=True)
    if saved is not None and not saved.is_open:
        # Just finished; a conversation streams one reply at a time (message_send and
        # message_retry refuse a second), so no other reply is open.
        reply, still_open = saved, None
    else:
        reply, still_open = await on_pool_thread(_final_state)(conversation, reply_id, saved)
    if reply is None:
        return
    # A finished reply's receipt reads the memories it names (its "What I used" panel is read
    # when opened): rendered on a thread, as the ORM must not run on the event loop.
    html = await on_pool_thread(_render_final)(conversation, reply, still_open, max_chars)
    await broadcasts.push(broadcasts.conversation_group(conversation.pk), html, sender=sender)


def _render_final(
    conversation: Conversation, reply: Message, still_open: Message | None, max_chars: int | None
) -> str:
    return broadcasts.render_message(reply) + broadcasts.render_composer(
        conversation, still_open, max_chars=max_chars
    )
