"""Load: many websocket users chatting at once for minutes, through the real stack.

    .venv/bin/python -m bench.load [--users 50] [--minutes 5] [--think 0.5]

`manage.py up` (uvicorn, both Celery workers, beat, the embedded PostgreSQL and Redis) against
the LLM stub in a process of its own (50 ms to the first token, 400 tokens a second, 40-token
answers). Each user sends a message, reads the answer to its end, waits --think seconds and
sends the next, for --minutes. Reported: turns, errors (a failed reply, a socket error or a
turn over 30 s), Thalamus's added time to first token and own cost per turn (as
bench.turn_overhead measures them), and the resident memory of every process `up` started, at
the start of the load and at its end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import tempfile
import time
from pathlib import Path

import psutil
import websockets

from bench._harness import free_port, start_up, stop_up, summary, wait_for_page
from bench.turn_overhead import STUB_TPS, STUB_TTFT, _setup_users
from llm_stub import StubServer

REPLY_TOKENS = 40
REPLIES = 50_000


def _serve_stub(control) -> None:
    reply = " ".join(["word"] * REPLY_TOKENS)
    with StubServer(port=0) as stub:
        stub.set_defaults(ttft=STUB_TTFT, tps=STUB_TPS)
        # Answers (not the background calls, which get the stub's own JSON) are 40 words.
        for _ in range(REPLIES):
            stub.script(
                {"content": reply, "ttft": STUB_TTFT, "tps": STUB_TPS, "match": "You are Thalamus"}
            )
        control.send(stub.url)
        control.recv()  # until told to stop


async def _user(port: int, session_key: str, conversation_id: int, until: float, think: float):
    timings, errors = [], []
    uri = f"ws://127.0.0.1:{port}/ws/c/{conversation_id}/"
    headers = {"Cookie": f"sessionid={session_key}", "Origin": f"http://127.0.0.1:{port}"}
    turn = 0
    while time.monotonic() < until:
        try:
            async with websockets.connect(uri, additional_headers=headers, max_size=None) as ws:
                while time.monotonic() < until:
                    sent = time.perf_counter()
                    text = f"turn {turn} hello"
                    await ws.send(json.dumps({"action": "send", "content": text}))
                    turn += 1
                    first = None
                    while True:
                        frame = await asyncio.wait_for(ws.recv(), 30)
                        if first is None and 'class="md-src"' in frame and "word" in frame:
                            first = time.perf_counter()
                        if "msg-assistant complete" in frame:
                            timings.append(
                                (sent, first or time.perf_counter(), time.perf_counter())
                            )
                            break
                        refused = 'class="chat-notice error"' in frame and (
                            'role="alert"></div>' not in frame
                        )
                        if "msg-assistant failed" in frame or refused:
                            errors.append(frame[:200])
                            break
                    await asyncio.sleep(think)
        except (OSError, TimeoutError, websockets.WebSocketException) as exc:
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
    return timings, errors


def _memory(process: psutil.Process) -> dict[str, float]:
    """Resident MiB of `up` and every process below it, by a short name."""
    rows = {}
    for proc in [process, *process.children(recursive=True)]:
        try:
            words = [w for w in proc.cmdline()[1:] if not w.startswith("-")] or [proc.name()]
            rows[f"{proc.pid} {' '.join(words)[:70]}"] = proc.memory_info().rss / 2**20
        except psutil.Error:
            continue
    return rows


async def _run(port: int, users: list, minutes: float, think: float, up_pid: int) -> None:
    up = psutil.Process(up_pid)
    # Warm-up: one turn each, then the memory baseline.
    await asyncio.gather(*(_user(port, *user, time.monotonic() + 0.1, 0) for user in users))
    before = _memory(up)
    until = time.monotonic() + minutes * 60
    results = await asyncio.gather(*(_user(port, *user, until, think) for user in users))
    after = _memory(up)
    timings = [t for user_timings, _ in results for t in user_timings]
    errors = [e for _, user_errors in results for e in user_errors]
    streaming = (REPLY_TOKENS - 1) / STUB_TPS
    added = [(first - sent - STUB_TTFT) * 1000 for sent, first, _ in timings]
    own = [(done - sent - STUB_TTFT - streaming) * 1000 for sent, _, done in timings]
    print(f"{len(users)} users for {minutes:g} min, think {think:g} s")
    print(f"turns {len(timings)} ({len(timings) / (minutes * 60):.1f}/s), errors {len(errors)}")
    for error in errors[:5]:
        print(f"  error: {error}")
    print(f"added time to first token: {summary(added)}")
    print(f"own cost per turn:         {summary(own)}")
    print("resident memory (MiB), at the load's start -> end:")
    for name in sorted(set(before) | set(after)):
        start, end = before.get(name), after.get(name)
        start_text = f"{start:.0f}" if start is not None else "-"
        end_text = f"{end:.0f}" if end is not None else "-"
        print(f"  {name}: {start_text} -> {end_text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--think", type=float, default=0.5)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    control, stub_end = context.Pipe()
    stub = context.Process(target=_serve_stub, args=(stub_end,), daemon=True)
    stub.start()
    stub_url = control.recv()
    with tempfile.TemporaryDirectory(prefix="thalamus-load-") as tmp:
        data_dir = Path(tmp) / "data"
        port = free_port()
        process = start_up(data_dir, port, Path(tmp) / "up.log", THALAMUS_LLM_BASE_URL=stub_url)
        try:
            wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", process)
            users = _setup_users(data_dir, args.users)
            asyncio.run(_run(port, users, args.minutes, args.think, process.pid))
        finally:
            stop_up(process)
            control.send("stop")
            stub.join(10)


if __name__ == "__main__":
    main()
