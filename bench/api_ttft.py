"""Time to first token through /v1 (the official openai SDK, streaming) against the websocket path.

Both against the same running server (`manage.py up`) and the same stub with a fixed time to
first token, one user at a time: added TTFT = first streamed text at the client − the stub's
TTFT. The /v1 client calls as Open WebUI does: the whole history on every call, no header.

Run: .venv/bin/python -m bench.api_ttft [--turns 60]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

import openai
from asgiref.sync import sync_to_async

from bench._harness import cpu_reference_ms, free_port, start_up, stop_up, summary, wait_for_page
from bench.turn_overhead import STUB_TTFT, _serve_stub, _setup_users, _user_turns

WARM_UP = 5
THINK = 0.5


def _api_key(username: str) -> str:
    from django.contrib.auth import get_user_model

    from apps.accounts.services import api_key_create

    _, secret = api_key_create(user=get_user_model().objects.get(username=username), name="bench")
    return secret


async def _api_turns(port: int, secret: str, turns: int) -> list[float]:
    """Added TTFT of each call; before each, the round trip of an authenticated GET /v1/models,
    which is the HTTP, middleware and key check every call pays before its turn starts."""
    client = openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key=secret, max_retries=0, timeout=30
    )
    history: list[dict] = []
    added = []
    round_trips = []
    for turn in range(turns):
        if turn:
            await asyncio.sleep(THINK)  # as the websocket user reads the answer
        history.append({"role": "user", "content": f"turn {turn} hello"})
        listed = time.perf_counter()
        await client.models.list()
        round_trips.append((time.perf_counter() - listed) * 1000)
        sent = time.perf_counter()
        first = None
        text = ""
        stream = await client.chat.completions.create(
            model="thalamus", messages=history, stream=True
        )
        async for chunk in stream:
            delta = chunk.choices[0].delta.content if chunk.choices else None
            if delta and first is None:
                first = time.perf_counter()
            text += delta or ""
        history.append({"role": "assistant", "content": text})
        added.append((first - sent - STUB_TTFT) * 1000)
    await client.close()
    print(f"/v1/models round trip (the key checked, no turn): {summary(round_trips[WARM_UP:])}")
    return added


def _server_side(username: str) -> str:
    """Medians of what the server recorded of the user's replies: its TTFT and the steps."""
    import statistics

    from apps.chat.models import Message

    rows = Message.objects.filter(
        role="assistant", status="complete", conversation__owner__username=username
    ).values_list("trace", "ttft_ms")
    steps: dict[str, list[float]] = {}
    for trace, ttft in list(rows)[WARM_UP:]:
        steps.setdefault("server ttft", []).append(ttft)
        for span in trace.get("spans", []):
            steps.setdefault(span["name"], []).append(span["start_ms"] + span["ms"])
    return ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in steps.items())


async def _run(port: int, users: list[tuple[str, int]], secret: str, turns: int) -> None:
    print(f"CPU reference (cpu_reference_ms): {cpu_reference_ms():.0f} ms", flush=True)
    websocket = await _user_turns(port, *users[0], turns=turns, think=THINK)
    ws_added = [(first - sent - STUB_TTFT) * 1000 for sent, first, _ in websocket]
    api_added = await _api_turns(port, secret, turns)
    print(f"websocket: added TTFT {summary(ws_added[WARM_UP:])}", flush=True)
    print(f"/v1 stream: added TTFT {summary(api_added[WARM_UP:])}", flush=True)
    for label, username in (("websocket", "bench0"), ("/v1 stream", "bench1")):
        ends = await sync_to_async(_server_side)(username)
        print(f"{label}: server-side medians, ms from the turn's start: {ends}", flush=True)


def main() -> None:
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=60)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    control, stub_end = context.Pipe()
    stub = context.Process(target=_serve_stub, args=(args.turns * 6, 40, stub_end), daemon=True)
    stub.start()
    stub_url = control.recv()
    with tempfile.TemporaryDirectory(prefix="thalamus-api-ttft-") as tmp:
        data_dir = Path(tmp) / "data"
        port = free_port()
        process = start_up(data_dir, port, Path(tmp) / "up.log", THALAMUS_LLM_BASE_URL=stub_url)
        try:
            wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", process)
            users = _setup_users(data_dir, 2)
            secret = _api_key("bench1")
            asyncio.run(_run(port, users, secret, args.turns))
        finally:
            stop_up(process)
            control.send("stop")
            stub.join(10)
    sys.exit(0)


if __name__ == "__main__":
    main()
