"""Thalamus's own cost per chat turn, through the real stack: uvicorn, Channels, Redis, Postgres.

The LLM is our stub with a fixed time to first token and token rate, so whatever the client
measures beyond the stub's own time is Thalamus's overhead:
  added TTFT   = first streamed text seen by the websocket client − the stub's TTFT
  own cost     = turn wall time (send → final fragment) − the stub's TTFT − streaming time

A user waits --think seconds (0.5) after an answer before sending the next message, as a person
reading it would; by then the previous turn's background work (reflection, episode summaries on
the Celery worker, against the same stub) has mostly finished. --think 0 sends turns back to back,
each meeting the previous one's background work on the same two cores.

Run: .venv/bin/python -m bench.turn_overhead [--turns 200] [--users 20] [--think 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import websockets

from bench._harness import (
    cpu_reference_ms,
    cpu_times,
    free_port,
    start_up,
    steal_share,
    stop_up,
    summary,
    wait_for_page,
)
from llm_stub import StubServer

STUB_TTFT = 0.05
STUB_TPS = 400.0


def _setup_users(data_dir: Path, count: int) -> list[tuple[str, int]]:
    """Create users, sessions and conversations through Django, pointed at up's database."""
    os.environ["THALAMUS_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.backends.db import SessionStore

    from apps.chat.models import Conversation
    from apps.core.models import RuntimeConfig
    from apps.core.selectors import forget_runtime_config

    # Measures the turn, not the per-user rate limit (which would stop 200 turns a minute).
    config = RuntimeConfig.objects.order_by("pk").first() or RuntimeConfig()
    config.turns_per_minute = 0
    config.save()
    forget_runtime_config()
    User = get_user_model()
    result = []
    for index in range(count):
        user, _ = User.objects.get_or_create(username=f"bench{index}")
        session = SessionStore()
        session["_auth_user_id"] = str(user.pk)
        session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
        session["_auth_user_hash"] = user.get_session_auth_hash()
        session.create()
        conversation = Conversation.objects.create(owner=user)
        result.append((session.session_key, conversation.pk))
    return result


async def _user_turns(
    port: int, session_key: str, conversation_id: int, turns: int, think: float
) -> list:
    timings = []
    uri = f"ws://127.0.0.1:{port}/ws/c/{conversation_id}/"
    headers = {"Cookie": f"sessionid={session_key}", "Origin": f"http://127.0.0.1:{port}"}
    async with websockets.connect(uri, additional_headers=headers, max_size=None) as ws:
        for turn in range(turns):
            if turn:
                await asyncio.sleep(think)  # reading the answer before typing the next message
            timings.append(await ws_turn(ws, turn))
    return timings


async def ws_turn(ws, turn: int) -> tuple[float, float, float]:
    """One turn over a chat page's socket: when it was sent, its first fragment, its end."""
    sent = time.perf_counter()
    await ws.send(json.dumps({"action": "send", "content": f"turn {turn} hello"}))
    first = None
    while True:
        frame = await asyncio.wait_for(ws.recv(), 30)
        if first is None and 'class="md-src"' in frame and "word" in frame:
            first = time.perf_counter()
        if "msg-assistant complete" in frame:  # arrives with the re-enabled composer
            return sent, first, time.perf_counter()
        if "msg-assistant failed" in frame:
            raise RuntimeError("a turn failed: " + frame[:300])


def _report(
    label: str, timings: list, reply_tokens: int, stub_ttfts: list[float] | None = None
) -> list[str]:
    """Figures against the stub's nominal TTFT and, paired turn by turn, its measured one."""
    # The stub sends the first token at its TTFT and each next one 1/tps later: the last goes
    # out (reply_tokens - 1) / tps after the first, with the finish reason right behind it.
    streaming = (reply_tokens - 1) / STUB_TPS
    added_ttft = [(first - sent - STUB_TTFT) * 1000 for sent, first, _ in timings]
    own_cost = [(done - sent - STUB_TTFT - streaming) * 1000 for sent, _, done in timings]
    lines = [
        f"{label}: added time to first token: {summary(added_ttft)}",
        f"{label}: own cost per turn:        {summary(own_cost)}",
    ]
    if stub_ttfts is not None:
        lines += [
            f"{label}: the stub's own TTFT (request in -> first token out): "
            f"{summary([t * 1000 for t in stub_ttfts])}",
            f"{label}: added TTFT beyond the stub's measured TTFT: "
            + summary(
                [
                    (first - sent - t) * 1000
                    for (sent, first, _), t in zip(timings, stub_ttfts, strict=True)
                ]
            ),
            f"{label}: own cost beyond the stub's measured time: "
            + summary(
                [
                    (done - sent - t - streaming) * 1000
                    for (sent, _, done), t in zip(timings, stub_ttfts, strict=True)
                ]
            ),
        ]
    for line in lines:
        print(line, flush=True)
    return lines


def _server_side(label: str, since: datetime) -> None:
    """Medians of the timings the server itself recorded in the trace of each reply since then.

    The replies stay: the worker may still be summarising them into episodes that refer to them.
    """
    import statistics

    from apps.chat.models import Message

    traces = list(
        Message.objects.filter(
            role="assistant", status="complete", created_at__gte=since
        ).values_list("trace", "ttft_ms")
    )
    steps = {}
    for trace, ttft in traces:
        for step, ms in trace.get("timings_ms", {}).items():
            steps.setdefault(step, []).append(ms)
        for step, ms in trace.get("memory", {}).get("timings_ms", {}).items():
            steps.setdefault(f"memory.{step}", []).append(ms)
        steps.setdefault("server ttft", []).append(ttft)
    medians = ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in steps.items() if v)
    print(f"{label}: server-side medians (ms): {medians}", flush=True)
    last = traces[-1][0].get("memory", {}) if traces else {}
    print(
        f"{label}: last turn's memory: {len(last.get('memories', []))} memories, "
        f"{len(last.get('triples', []))} triples, plan {last.get('plan', {}).get('source')} "
        f"with {len(last.get('plan', {}).get('steps', []))} steps, route {last.get('route')}",
        flush=True,
    )


async def _run(
    port: int,
    users: list[tuple[str, int]],
    turns: int,
    concurrent: int,
    think: float,
    reply_tokens: int,
    stub_control,
) -> None:
    from asgiref.sync import sync_to_async

    print(f"think time between a user's turns: {think * 1000:.0f} ms", flush=True)
    print(f"CPU reference (cpu_reference_ms): {cpu_reference_ms():.0f} ms", flush=True)
    before = cpu_times()
    started = datetime.now(UTC)
    single = await _user_turns(port, *users[0], turns=turns, think=think)
    print(f"1 user: CPU steal during the run {steal_share(before, cpu_times()):.0%}", flush=True)
    stub_control.send("first-token-times")
    stub_ttfts = stub_control.recv()
    if len(stub_ttfts) != len(single):
        print(f"(the stub streamed {len(stub_ttfts)} replies for {len(single)} turns)")
        stub_ttfts = None
    # The first turns warm the connection pools.
    _report("1 user", single[5:], reply_tokens, stub_ttfts[5:] if stub_ttfts else None)
    await sync_to_async(_server_side)("1 user", started)
    if not concurrent:
        return
    per_user = max(1, turns // concurrent)
    before = cpu_times()
    started = datetime.now(UTC)
    results = await asyncio.gather(
        *(_user_turns(port, *users[1 + i], turns=per_user, think=think) for i in range(concurrent))
    )
    steal = steal_share(before, cpu_times())
    print(f"{concurrent} concurrent users: CPU steal during the run {steal:.0%}", flush=True)
    _report(
        f"{concurrent} concurrent users", [t for user in results for t in user[1:]], reply_tokens
    )
    await sync_to_async(_server_side)(f"{concurrent} concurrent users", started)


def _serve_stub(replies: int, reply_tokens: int, control) -> None:
    """The stub in a process of its own, so the clients' event loop never holds up its replies."""
    reply = " ".join(["word"] * reply_tokens)
    with StubServer(port=0) as stub:
        stub.set_defaults(ttft=STUB_TTFT, tps=STUB_TPS)
        for _ in range(replies):
            stub.script(
                {"content": reply, "ttft": STUB_TTFT, "tps": STUB_TPS, "match": "You are Thalamus"}
            )
        control.send(stub.url)
        while control.recv() == "first-token-times":
            control.send(stub.first_token_seconds)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=205)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument(
        "--reply-tokens",
        type=int,
        default=40,
        help="tokens per answer (40); long answers show what streaming them costs",
    )
    parser.add_argument(
        "--think",
        type=float,
        default=0.5,
        help="seconds a user waits after an answer before the next message (0: back to back, "
        "when each turn also meets the previous one's background reflection)",
    )
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    control, stub_end = context.Pipe()
    stub = context.Process(
        target=_serve_stub, args=(args.turns * 3, args.reply_tokens, stub_end), daemon=True
    )
    stub.start()
    stub_url = control.recv()
    with tempfile.TemporaryDirectory(prefix="thalamus-turn-") as tmp:
        data_dir = Path(tmp) / "data"
        port = free_port()
        process = start_up(data_dir, port, Path(tmp) / "up.log", THALAMUS_LLM_BASE_URL=stub_url)
        try:
            wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", process)
            users = _setup_users(data_dir, args.users + 1)
            asyncio.run(
                _run(port, users, args.turns, args.users, args.think, args.reply_tokens, control)
            )
        finally:
            stop_up(process)
            control.send("stop")
            stub.join(10)
            print(f"(up log: {len(Path(tmp, 'up.log').read_text().splitlines())} lines)")
    sys.exit(0)


if __name__ == "__main__":
    main()
