"""Memory with a weak local model: the time from a message to the memory it forms.

The stub is the test suite's weak model (tests/cognition/weak_conversation.py): llama.cpp's
/props saying 4,096 tokens, no end of sequence, --tps tokens a second (13), one slot, and the
same twelve scripted turns (a 6,000-character paste among them, most stating a fact). They run
through `manage.py up` with the shipped settings except the answer's cap (--answer-cap, so a
run takes minutes, not a quarter of an hour), a user reading each answer for --think seconds.
Reported per turn and in sum: the answer's time to first token and its length, the time from
sending a message to the first memory formed from it, and the memory write success rate.

Run: .venv/bin/python -m bench.weak_model [--tps 13] [--answer-cap 128] [--think 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

import websockets

from bench._harness import free_port, start_up, stop_up, summary, wait_for_page
from bench.turn_overhead import _setup_users
from llm_stub import StubServer


def _serve_stub(tps: float, control) -> None:
    from tests.cognition.weak_conversation import CONTEXT, script

    with StubServer(port=0) as stub:
        stub.set_defaults(
            server="llamacpp", context=CONTEXT, overflow="reject", eos=False, tps=tps, slots=1
        )
        script(stub, tps)
        control.send(stub.url)
        while control.recv() != "stop":
            pass


def _configure(answer_cap: int) -> None:
    from apps.core.models import RuntimeConfig
    from apps.core.services import runtime_config_save

    config = RuntimeConfig.objects.order_by("pk").first() or RuntimeConfig()
    config.answer_max_tokens = answer_cap
    config.turns_per_minute = 0
    runtime_config_save(config=config)


def _memory_formed(conversation_id: int, index: int) -> bool:
    from apps.chat.models import Message
    from apps.memory.models import MemoryNode

    replies = Message.objects.filter(conversation_id=conversation_id, role="assistant")
    reply = replies.order_by("pk")[index : index + 1].first()
    return reply is not None and MemoryNode.objects.filter(source_message=reply).exists()


async def _conversation(port: int, session_key: str, conversation_id: int, think: float):
    from asgiref.sync import sync_to_async

    from tests.cognition.weak_conversation import TURNS

    uri = f"ws://127.0.0.1:{port}/ws/c/{conversation_id}/"
    headers = {"Cookie": f"sessionid={session_key}", "Origin": f"http://127.0.0.1:{port}"}
    rows = []
    watchers = []
    formed = sync_to_async(_memory_formed)

    async def watch(index: int, sent: float) -> float | None:
        deadline = sent + 600
        while time.perf_counter() < deadline:
            if await formed(conversation_id, index):
                return time.perf_counter() - sent
            await asyncio.sleep(0.25)
        return None

    async with websockets.connect(uri, additional_headers=headers, max_size=None) as ws:
        for index, (message, fact, _) in enumerate(TURNS):
            sent = time.perf_counter()
            await ws.send(json.dumps({"action": "send", "content": message}))
            first = None
            while True:
                frame = await asyncio.wait_for(ws.recv(), 600)
                if first is None and 'class="md-src"' in frame and "></textarea>" not in frame:
                    first = time.perf_counter()
                if "msg-assistant complete" in frame or "msg-assistant failed" in frame:
                    done = time.perf_counter()
                    break
            if fact is not None:
                watchers.append((index, asyncio.ensure_future(watch(index, sent))))
            rows.append([index, (first or done) - sent, done - sent, None])
            await asyncio.sleep(think)
    for index, watcher in watchers:
        rows[index][3] = await watcher
    return rows


def _write_rate() -> str:
    from apps.dashboard.selectors import memory_write_rates

    rate = memory_write_rates(owner_id=None)["hour"]
    return f"{rate.written} of {rate.turns} turns"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tps", type=float, default=13.0)
    parser.add_argument("--answer-cap", type=int, default=128)
    parser.add_argument("--think", type=float, default=5.0)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    control, stub_end = context.Pipe()
    stub = context.Process(target=_serve_stub, args=(args.tps, stub_end), daemon=True)
    stub.start()
    stub_url = control.recv()
    with tempfile.TemporaryDirectory(prefix="thalamus-weak-") as tmp:
        data_dir = Path(tmp) / "data"
        port = free_port()
        process = start_up(data_dir, port, Path(tmp) / "up.log", THALAMUS_LLM_BASE_URL=stub_url)
        try:
            wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", process)
            ((session_key, conversation_id),) = _setup_users(data_dir, 1)
            _configure(args.answer_cap)
            started = time.perf_counter()
            rows = asyncio.run(_conversation(port, session_key, conversation_id, args.think))
            elapsed = time.perf_counter() - started
            time.sleep(15)  # the last reflections
            rate = _write_rate()
        finally:
            stop_up(process)
            control.send("stop")
            stub.join(10)
    print(f"stub: llama.cpp-like, 4,096 tokens, no end of sequence, {args.tps} tokens/s, 1 slot")
    print(f"answer cap {args.answer_cap} tokens, {args.think} s reading each answer")
    print("turn  first token  answer done  memory formed (s after sending)")
    for index, ttft, done, memory in rows:
        formed = "-" if memory is None else f"{memory:.1f}"
        print(f"{index:>4}  {ttft:>11.2f}  {done:>11.2f}  {formed:>13}")
    memories = [row[3] * 1000 for row in rows if row[3] is not None]
    print(f"time to first token: {summary([row[1] * 1000 for row in rows])}")
    print(f"time to a memory formed: {summary(memories)}")
    print(f"memory write success rate: {rate}; whole conversation {elapsed:.0f} s")
    sys.exit(0)


if __name__ == "__main__":
    main()
