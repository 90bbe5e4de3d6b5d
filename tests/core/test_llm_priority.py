"""The chat first: background calls use the slots a server has spare; answers preempt them."""

from __future__ import annotations

import threading
import time

import pytest

from apps.core.llm.gateway import complete
from apps.core.llm.limits import CHAT, REFLECTION, role_endpoint
from apps.core.llm.outcomes import Preempted
from apps.core.llm.priority import (
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


def _once_generating(llm_stub, then, *, tokens: int = 0, tps: float = 40) -> threading.Thread:
    """A thread that calls `then` once the stub has sent the first token of a reply, and about
    `tokens` more at `tps` (the stub keeps its pace however late its thread runs)."""
    sent = len(llm_stub.first_token_seconds)

    def wait_then() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
            _completions(llm_stub) and len(llm_stub.first_token_seconds) > sent
        ):
            time.sleep(0.01)
        time.sleep(tokens / tps)
        then()

    thread = threading.Thread(target=wait_then, daemon=True)
    thread.start()
    return thread


def test_a_background_call_runs_beside_an_answer_in_a_spare_slot(llm_stub, config):
    config(background_wait_seconds=30)
    llm_stub.set_defaults(server="llamacpp", slots=4, tps=40, eos=False)
    base_url = role_endpoint(CHAT).base_url
    chat_active_mark(base_url=base_url, call_id="streaming")
    # Another answer starts while the reflection generates: two answers and it leave a slot.
    next_answer = _once_generating(
        llm_stub, lambda: chat_active_mark(base_url=base_url, call_id="next")
    )
    try:
        completion = complete(role=REFLECTION, prompt=HELLO, max_tokens=60)
    finally:
        next_answer.join(20)
        chat_active_clear(base_url=base_url, call_id="streaming")
        chat_active_clear(base_url=base_url, call_id="next")

    # Not a wait for room, which lasts its 30 s: a check, given three times 0.3 s for a loaded
    # machine.
    assert completion.waited_seconds < 1.0
    assert completion.finish_reason == "length"
    assert len(_completions(llm_stub)) == 1


def test_a_background_call_is_preempted_when_answers_would_leave_no_slot_free(llm_stub, config):
    config(background_wait_seconds=30)
    llm_stub.set_defaults(server="llamacpp", slots=2, tps=40, eos=False)
    base_url = role_endpoint(CHAT).base_url
    marked = []

    def answer_starts() -> None:
        marked.append(time.monotonic())
        chat_active_mark(base_url=base_url, call_id="a")

    # The answer comes once the reflection has written some 20 of its 200 tokens (5 s).
    answer = _once_generating(llm_stub, answer_starts, tokens=20)
    try:
        with pytest.raises(Preempted) as preempted:
            complete(role=REFLECTION, prompt=HELLO, max_tokens=200)
        closed = time.monotonic()
    finally:
        answer.join(20)
        chat_active_clear(base_url=base_url, call_id="a")

    # Closed soon after the answer's mark (a check is every 0.05 s; a loaded machine adds its
    # own delays), not at the end of the 4.5 s it had left, with what it had written counted.
    assert closed - marked[0] < 1.0
    assert 5 <= preempted.value.generated < 200
    (asked,) = _completions(llm_stub)
    assert asked["completion_tokens"] == 200 and asked.get("finish_reason") != "stop"
    assert f'kind="{Preempted.kind}"' in _metrics_text()


def test_a_preempted_call_frees_the_slot_for_the_answer_at_once(llm_stub, config):
    """One slot, two seconds to read a prompt: the answer must not wait for the reflection."""
    config(background_wait_seconds=30)
    llm_stub.set_defaults(slots=1, ttft=2.0)
    answered = []

    def answer() -> None:
        # The answer comes while the reflection holds the slot, reading its prompt.
        deadline = time.monotonic() + 20
        while not (_completions(llm_stub) and llm_stub.generating) and time.monotonic() < deadline:
            time.sleep(0.01)
        answered.append(complete(role=CHAT, prompt=HELLO, max_tokens=5))

    chat = threading.Thread(target=answer)
    chat.start()
    with pytest.raises(Preempted):
        complete(role=REFLECTION, prompt=HELLO)
    chat.join()

    assert answered and answered[0].content
    reflection, for_the_user = _completions(llm_stub)
    assert for_the_user["body"]["max_tokens"] == 5
    # The slot was freed within moments of the answer's arrival (a check is every 0.05 s; a
    # loaded machine adds its own delays), not after the rest of the prompt's 2 s.
    assert for_the_user["slot_wait"] < 1.0


def test_a_background_call_that_waits_out_its_time_for_room_is_preempted(llm_stub, config):
    config(background_wait_seconds=1)
    base_url = role_endpoint(CHAT).base_url
    chat_active_mark(base_url=base_url, call_id="long answer")
    try:
        started = time.monotonic()
        with pytest.raises(Preempted):
            complete(role=REFLECTION, prompt=HELLO)
    finally:
        chat_active_clear(base_url=base_url, call_id="long answer")

    assert 0.9 <= time.monotonic() - started < 3
    assert not _completions(llm_stub)


def test_a_preempted_call_does_not_fall_back_to_the_next_endpoint(llm_stub, config):
    # A fallback that cannot be reached: walking to it would end in Unreachable.
    config(
        background_wait_seconds=0,
        model_fallbacks={REFLECTION: ["http://127.0.0.1:9/v1 other-model"]},
    )
    base_url = role_endpoint(CHAT).base_url
    chat_active_mark(base_url=base_url, call_id="answer")
    try:
        with pytest.raises(Preempted):
            complete(role=REFLECTION, prompt=HELLO)
    finally:
        chat_active_clear(base_url=base_url, call_id="answer")


def _metrics_text() -> str:
    from apps.core.metrics import metrics_text

    return metrics_text().decode()
