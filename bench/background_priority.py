"""The chat's time to first token with and without background LLM work queued behind it.

A local server answers one request at a time. The stub here does too (one slot), with a fixed
time to first token (--ttft, as a CPU reading a prompt) and a fixed rate (--tps, 13 tokens/s as
a small model on two cores). Both phases run the same chat turns through the real stack
(`manage.py up`: uvicorn, Channels, the Celery workers):
  idle:   reflection off, nothing queued;
  queued: --queued completed turns are queued for reflection first (one background call of
          several seconds each on the single slot), then the chat turns run while they drain.
Reported: the client's time to first token in each phase (median, p95) and the ratio.

Run: .venv/bin/python -m bench.background_priority [--turns 10] [--queued 20]
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

from bench._harness import free_port, start_up, stop_up, summary, wait_for_page
from bench.turn_overhead import _setup_users, _user_turns
from llm_stub import StubServer

# A reflection's reply: long enough to hold the slot for seconds at a local model's rate.
REFLECTION_WORDS = 60


def _serve_stub(ttft: float, tps: float, control) -> None:
    """The stub in a process of its own, one slot; a client that leaves frees the slot at once
    (llama.cpp notices between two prompt batches, so a real server can take longer)."""
    with StubServer(port=0) as stub:
        stub.set_defaults(ttft=ttft, tps=tps, slots=1)
        control.send(stub.url)
        while (command := control.recv()) != "stop":
            if command == "script-chat":
                count = control.recv()
                for _ in range(count):
                    stub.script(
                        {
                            "content": "word " * 20,
                            "match": "You are Thalamus",
                            "ttft": ttft,
                            "tps": tps,
                        }
                    )
                control.send("ok")
            elif command == "stats":
                control.send({"max_concurrent": stub.max_concurrent, "requests": stub.requests})


def _configure(*, reflection: bool) -> None:
    from apps.core.models import RuntimeConfig
    from apps.core.services import runtime_config_save

    config = RuntimeConfig.objects.order_by("pk").first() or RuntimeConfig()
    config.reflection_enabled = reflection
    config.critic_enabled = False
    config.turns_per_minute = 0
    runtime_config_save(config=config)


def _queue_reflections(count: int) -> list[int]:
    """`count` completed turns of another user, each queued for reflection."""
    from django.contrib.auth import get_user_model

    from apps.chat.models import Conversation, Message
    from apps.cognition import tasks

    user, _ = get_user_model().objects.get_or_create(username="bench-background")
    ids = []
    for index in range(count):
        conversation = Conversation.objects.create(owner=user, title=f"queued {index}")
        asked = Message.objects.create(
            conversation=conversation, role="user", content=f"I like number {index} " * 20
        )
        reply = Message.objects.create(
            conversation=conversation,
            role="assistant",
            content="reflective memory " + "noted " * REFLECTION_WORDS,
            reply_to=asked,
        )
        ids.append(reply.pk)
    for pk in ids:
        tasks.reflect.delay(pk)
    return ids


def _reflected(ids: list[int]) -> int:
    from apps.chat.models import Message

    return Message.objects.filter(pk__in=ids, trace__has_key="reflection").count()


async def _phase(port: int, user, turns: int, think: float) -> list[float]:
    timings = await _user_turns(port, *user, turns=turns, think=think)
    return [(first - sent) * 1000 for sent, first, _ in timings]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=10, help="chat turns per phase")
    parser.add_argument("--queued", type=int, default=20, help="turns of background work queued")
    parser.add_argument("--ttft", type=float, default=2.0, help="the stub's time to first token")
    parser.add_argument("--tps", type=float, default=13.0, help="the stub's tokens per second")
    parser.add_argument("--think", type=float, default=1.0, help="seconds between chat turns")
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    control, stub_end = context.Pipe()
    stub = context.Process(target=_serve_stub, args=(args.ttft, args.tps, stub_end), daemon=True)
    stub.start()
    stub_url = control.recv()
    with tempfile.TemporaryDirectory(prefix="thalamus-background-") as tmp:
        data_dir = Path(tmp) / "data"
        port = free_port()
        process = start_up(data_dir, port, Path(tmp) / "up.log", THALAMUS_LLM_BASE_URL=stub_url)
        try:
            wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", process)
            users = _setup_users(data_dir, 2)
            from apps.chat.models import Conversation

            Conversation.objects.update(title="bench")  # no title calls in either phase
            control.send("script-chat")
            control.send(2 * args.turns + 2)
            control.recv()

            _configure(reflection=False)
            idle = asyncio.run(_phase(port, users[0], args.turns + 1, args.think))[1:]

            _configure(reflection=True)
            ids = _queue_reflections(args.queued)
            time.sleep(1.0)  # the first reflection is generating when the chat begins
            started = time.monotonic()
            queued = asyncio.run(_phase(port, users[1], args.turns + 1, args.think))[1:]
            during = _reflected(ids)
            deadline = time.monotonic() + 600
            while _reflected(ids) < len(ids) and time.monotonic() < deadline:
                time.sleep(1)
            drained = time.monotonic() - started
            done = _reflected(ids)
            control.send("stats")
            stats = control.recv()
        finally:
            stop_up(process)
            control.send("stop")
            stub.join(10)
    ratio = sorted(queued)[len(queued) // 2] / sorted(idle)[len(idle) // 2]
    print(f"stub: ttft {args.ttft} s, {args.tps} tokens/s, one slot", flush=True)
    print(f"idle:   time to first token {summary(idle)}")
    print(f"queued: time to first token {summary(queued)}")
    print(f"median ratio queued/idle: {ratio:.3f}")
    print(
        f"background: {args.queued} reflections queued; {during} done while the chat ran, "
        f"{done} after {drained:.0f} s; the server ran at most "
        f"{stats['max_concurrent']} generation at once"
    )
    chat_waits = [
        r["slot_wait"] * 1000
        for r in stats["requests"]
        if "You are Thalamus" in json.dumps(r["body"].get("messages", ""))
    ]
    if chat_waits:
        print(f"the chat's wait for the server's slot: {summary(chat_waits[-args.turns :])}")
    sys.exit(0)


if __name__ == "__main__":
    main()
