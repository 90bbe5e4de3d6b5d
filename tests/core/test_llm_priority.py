"""The chat first: background calls use the slots a server has spare, give way at most twice."""

from __future__ import annotations

import threading
import time

import pytest

from apps.core.llm.gateway import complete
from apps.core.llm.limits import CHAT, REFLECTION, role_endpoint
from apps.core.llm.priority import (
    MAX_GIVE_WAYS,
    background_clear,
    background_mark,
    chat_active_clear,
    chat_active_mark,
    room_for_background,
)
from apps.core.llm.servers import server_facts

pytestmark = pytest.mark.django_db

HELLO = [{"role": "user", "content": "hello"}]


def _completions(llm_stub) -> list[dict]:
    return [r for r in llm_stub.requests if r["path"].endswith("/chat/completions")]


def test_llama_cpp_tells_its_slots_through_props(llm_stub, config):
    llm_stub.set_defaults(server="llamacpp", slots=4)

    assert server_facts(role_endpoint(CHAT)).slots == 4


def test_ollama_counts_as_one_slot_unless_its_parallelism_is_configured(llm_stub, config, settings):
    llm_stub.set_defaults(server="ollama", context=4096)
    assert server_facts(role_endpoint(CHAT)).slots == 1

    from apps.core.llm.limits import forget_model_limits

    forget_model_limits()
    settings.THALAMUS_OLLAMA_NUM_PARALLEL = 3
    assert server_facts(role_endpoint(CHAT)).slots == 3


def test_a_server_that_does_not_say_counts_as_one_slot(llm_stub, config):
    assert server_facts(role_endpoint(CHAT)).slots == 1


def test_room_leaves_a_slot_free_for_the_next_answer(llm_stub, config):
    base_url = "http://room.test/v1"
    assert room_for_background(base_url, slots=1, call_id="mine")
    chat_active_mark(base_url=base_url, call_id="answer")
    try:
        assert not room_for_background(base_url, slots=1, call_id="mine")
        assert not room_for_background(base_url, slots=2, call_id="mine")
        assert room_for_background(base_url, slots=3, call_id="mine")
        # Its own mark is not counted twice; another background call's is.
        background_mark(base_url=base_url, call_id="mine", seconds=30)
        assert room_for_background(base_url, slots=3, call_id="mine")
        background_mark(base_url=base_url, call_id="other", seconds=30)
        assert not room_for_background(base_url, slots=3, call_id="mine")
        assert room_for_background(base_url, slots=4, call_id="mine")
    finally:
        chat_active_clear(base_url=base_url, call_id="answer")
        background_clear(base_url=base_url, call_id="mine")
        background_clear(base_url=base_url, call_id="other")


def test_a_background_call_runs_beside_an_answer_in_a_spare_slot(llm_stub, config):
    config(background_wait_seconds=30)
    llm_stub.set_defaults(server="llamacpp", slots=4, tps=40, eos=False)
    base_url = role_endpoint(CHAT).base_url
    chat_active_mark(base_url=base_url, call_id="streaming")
    # Another answer starts while the reflection generates: two answers and it leave a slot.
    threading.Timer(0.5, lambda: chat_active_mark(base_url=base_url, call_id="next")).start()
    try:
        completion = complete(role=REFLECTION, prompt=HELLO, max_tokens=60)
    finally:
        chat_active_clear(base_url=base_url, call_id="streaming")
        chat_active_clear(base_url=base_url, call_id="next")

    assert completion.gave_way == 0 and completion.waited_seconds < 0.3
    assert completion.finish_reason == "length"
    assert len(_completions(llm_stub)) == 1


def test_a_background_call_gives_way_when_answers_would_leave_no_slot_free(llm_stub, config):
    config(background_wait_seconds=30)
    llm_stub.set_defaults(server="llamacpp", slots=2, tps=40, eos=False)
    base_url = role_endpoint(CHAT).base_url
    threading.Timer(0.5, lambda: chat_active_mark(base_url=base_url, call_id="a")).start()
    threading.Timer(1.5, lambda: chat_active_clear(base_url=base_url, call_id="a")).start()

    completion = complete(role=REFLECTION, prompt=HELLO, max_tokens=60)

    assert completion.gave_way == 1 and completion.waited_seconds >= 0.5
    assert len(_completions(llm_stub)) == 2


def test_a_background_call_gives_way_twice_at_most_then_runs_to_its_end(llm_stub, config):
    """One slot and a user who never stops: answers start every 0.6 s."""
    config(background_wait_seconds=60)
    llm_stub.set_defaults(slots=1, tps=40, eos=False)
    base_url = role_endpoint(CHAT).base_url
    stop = threading.Event()

    def chatting() -> None:
        turn = 0
        while not stop.is_set():
            turn += 1
            chat_active_mark(base_url=base_url, call_id=f"turn-{turn}")
            stop.wait(0.3)
            chat_active_clear(base_url=base_url, call_id=f"turn-{turn}")
            stop.wait(0.3)

    time.sleep(0.1)
    user = threading.Thread(target=chatting)
    user.start()
    try:
        completion = complete(role=REFLECTION, prompt=HELLO, max_tokens=80)
    finally:
        stop.set()
        user.join()

    assert completion.gave_way == MAX_GIVE_WAYS == 2
    assert completion.finish_reason == "length" and completion.completion_tokens == 80
    assert len(_completions(llm_stub)) == MAX_GIVE_WAYS + 1


def test_a_background_call_gives_way_to_a_call_the_user_waits_for(llm_stub, config):
    config(background_wait_seconds=30)
    llm_stub.set_defaults(slots=1, tps=40, eos=False)
    routed = []

    def route() -> None:
        time.sleep(0.5)
        # A round of the tool loop, before the answer.
        routed.append(complete(role=CHAT, prompt=HELLO, max_tokens=5))

    router = threading.Thread(target=route)
    router.start()
    completion = complete(role=REFLECTION, prompt=HELLO, max_tokens=60)
    router.join()

    assert routed and completion.gave_way == 1
    first, for_the_router, again = _completions(llm_stub)
    assert for_the_router["body"]["max_tokens"] == 5
    assert for_the_router["slot_wait"] < 0.3
