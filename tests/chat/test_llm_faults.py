"""Every way the LLM endpoint can fail ends the turn within its timeout + 5 s, status saved.

The chat websocket with the real channel layer and database; the endpoint is the stub over
real HTTP, each fault one scripted reply. THALAMUS_LLM_TIMEOUT is the time the answer waits
for any byte (the first, or the next one of a stream).
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from apps.chat import stops
from apps.chat.models import Conversation, Message
from tests.chat.conftest import connect_socket

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 2
WORDS = "one two three four five six"

FAULTS = {
    "no first byte": (
        {"fault": "hang", "ttft": 30},
        "failed",
        "took too long",
    ),
    "dropped before [DONE]": (
        {"content": WORDS, "fault": "drop_done"},
        "complete",
        "",
    ),
    "dropped mid-answer": ({"content": WORDS, "fault": "drop"}, "failed", "cut off"),
    "429 with Retry-After": (
        {"fault": "http_429", "retry_after": 120},
        "failed",
        "HTTP 429",
    ),
    "500 with Retry-After": (
        {"fault": "http_500", "retry_after": 120},
        "failed",
        "HTTP 500",
    ),
    "malformed SSE": ({"content": WORDS, "fault": "garbage"}, "failed", "could not read"),
    "slow tokens that stall": ({"content": WORDS, "tps": 0.2}, "failed", "took too long"),
    "slow tokens within the timeout": ({"content": WORDS, "tps": 2}, "complete", ""),
}


async def _receive_final(communicator, timeout: float) -> str:
    async with asyncio.timeout(timeout):
        while True:
            frame = await communicator.receive_from(timeout)
            if "msg-assistant failed" in frame or "msg-assistant complete" in frame:
                return frame


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_each_llm_fault_ends_the_turn_within_its_timeout_with_its_status_saved(
    fault, user, llm_stub, settings
):
    settings.THALAMUS_LLM_TIMEOUT = TIMEOUT
    scripted, status, sentence = FAULTS[fault]
    llm_stub.script(scripted)
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)

    started = time.monotonic()
    await communicator.send_to(text_data=json.dumps({"content": "are you there?"}))
    frame = await _receive_final(communicator, TIMEOUT + 5)
    elapsed = time.monotonic() - started

    # Slow tokens take their time; no single wait for a byte exceeds the timeout.
    budget = TIMEOUT + 5 + (3 if "slow" in fault else 0)
    assert elapsed < budget, f"{fault}: {elapsed:.1f} s"
    reply = await Message.objects.aget(conversation=conversation, role="assistant")
    assert reply.status == status, reply.trace.get("error_detail")
    assert sentence in reply.error
    assert sentence in frame
    if "slow" in fault and status == "failed":
        assert reply.content.strip() == "one", "the words that arrived are kept"
    # No turn is left running in this process once its background work is queued.
    running = [task for _, task in stops.RUNNING.values()]
    if running:
        await asyncio.wait(running, timeout=2)
    assert all(task.done() for task in running)
    await communicator.disconnect()
