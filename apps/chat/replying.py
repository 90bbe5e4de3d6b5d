"""A reply streamed to the pages that show its conversation: the asking page straight from its
socket, the others through the channel layer, in fragments throttled as the machine is busy; a
reasoning model's thinking folded above it; the end always pushed to every page."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Protocol

from apps.chat import broadcasts, services, stops
from apps.chat.models import Conversation, Message
from apps.chat.selectors import open_reply
from apps.cognition.answer import AnswerFailed, answer_reply
from apps.cognition.debate import REVIEWING
from apps.cognition.pipeline import TurnRun, answer_saved_reply
from apps.cognition.turn_request import PreparedTurn
from apps.core.db import on_pool_thread

logger = logging.getLogger(__name__)


class Page(Protocol):
    """The asking page's socket (ChatConsumer): its fragments go to it straight."""

    channel_name: str

    async def send_direct(self, html: str) -> bool: ...


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


def start_reply(
    conversation: Conversation,
    reply_id: int,
    turn: Awaitable[PreparedTurn] | None = None,
    *,
    max_chars: int | None,
    sender: Page | None = None,
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
    sender: Page | None = None,
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
    # A reasoning model's thinking: the latest, and what the pages were last shown of it.
    thought = thought_shown = ""

    async def show_thinking(thinking: str, *, now: bool = False) -> None:
        # Throttled as the text is; the whole of it once the reply's text begins.
        nonlocal last_flush, thought, thought_shown
        thought = thinking
        moment = time.monotonic()
        if thought_shown and not now and moment - last_flush < _flush_seconds():
            return
        last_flush = moment
        await open_pages()
        await push(broadcasts.render_thinking(reply_id, thought, first=not thought_shown))
        thought_shown = thought

    if sender is not None:
        look_up_listeners()
    task = asyncio.current_task()
    opening_timer = asyncio.get_running_loop().call_later(OPENING_LATEST_SECONDS, open_pages)
    try:
        # aclosing: a Stop that lands while pushing still closes the generator, which then
        # saves the partial answer as cancelled.
        callbacks = {
            "on_request": open_pages,
            "on_saved": show_final,
            "on_review": show_review,
            "on_thinking": show_thinking,
        }
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
                if thought != thought_shown:
                    await show_thinking(thought, now=True)
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
    sender: Page | None = None,
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
