"""Stop, from any web process: a reply is generated in one process, its Stop may reach another.

Each web process keeps the replies it generates here, by id, and listens on one channel-layer
group that every web process of the instance joins. A Stop for a reply this process is not
generating is published to that group once; the process that generates it cancels it there.
The running task saves the partial answer as cancelled, wherever the Stop came from.
"""

from __future__ import annotations

import asyncio
import logging
import weakref

from channels.layers import get_channel_layer
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

STOPS_GROUP = "chat-stops"

# Replies being generated in this process, by id, with their conversation's id: a Stop names
# the conversation it was sent from, and cancels only a reply of that conversation.
RUNNING: dict[int, tuple[int, asyncio.Task]] = {}
# Per event loop: done once that loop's listener has joined STOPS_GROUP.
_subscribed: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Future] = (
    weakref.WeakKeyDictionary()
)
_listeners: set[asyncio.Task] = set()


def reply_running(*, reply_id: int, conversation_id: int, task: asyncio.Task) -> None:
    """Register a reply this process generates, until its task ends."""
    RUNNING[reply_id] = (conversation_id, task)

    def forget(_) -> None:
        if RUNNING.get(reply_id, (None, None))[1] is task:
            del RUNNING[reply_id]

    task.add_done_callback(forget)


def reply_cancel_here(*, reply_id: int | None, conversation_id: int) -> bool:
    """Cancel the reply if this process generates it for that conversation; True if it did."""
    running = RUNNING.get(reply_id)
    if running is None or running[0] != conversation_id:
        return False
    running[1].cancel()
    return True


async def reply_stop(*, reply_id: int | None, conversation_id: int) -> bool:
    """Stop the conversation's reply wherever it is generated; True if it was here.

    Not here: the Stop goes to every web process once (a process with no such reply ignores it).
    """
    if reply_cancel_here(reply_id=reply_id, conversation_id=conversation_id):
        return True
    event = {"type": "reply.stop", "reply_id": reply_id, "conversation_id": conversation_id}
    try:
        await get_channel_layer().group_send(STOPS_GROUP, event)
    except (RedisError, OSError) as exc:
        logger.warning("sending a Stop to the other web processes failed: %s", exc)
    return False


async def listen_for_stops() -> None:
    """Make sure this process hears the Stops sent from the others, before it starts a reply.

    The first call in an event loop joins STOPS_GROUP (two Redis commands); later calls return
    at once.
    """
    loop = asyncio.get_running_loop()
    subscribed = _subscribed.get(loop)
    if subscribed is None:
        subscribed = _subscribed[loop] = loop.create_future()
        listener = loop.create_task(_listen(subscribed))
        _listeners.add(listener)
        listener.add_done_callback(_listeners.discard)
    await asyncio.shield(subscribed)


async def _listen(subscribed: asyncio.Future) -> None:
    layer = get_channel_layer()
    try:
        channel = await layer.new_channel()
        await layer.group_add(STOPS_GROUP, channel)
    except BaseException as exc:
        # The next reply tries again (Redis may be restarting).
        _subscribed.pop(asyncio.get_running_loop(), None)
        if isinstance(exc, Exception):
            subscribed.set_exception(exc)
            subscribed.exception()  # only the callers waiting on it need to see it
        else:
            subscribed.cancel()
        raise
    subscribed.set_result(None)
    while True:
        event = await layer.receive(channel)
        if event.get("type") == "reply.stop":
            reply_cancel_here(
                reply_id=event.get("reply_id"), conversation_id=event.get("conversation_id")
            )
