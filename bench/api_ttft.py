"""Time to first token through /v1 (the official openai SDK, streaming) against the websocket path.

Both against the same running server (`manage.py up`) and the same stub with a fixed time to
first token, the paths' turns interleaved (a busy moment on the machine costs all of them):
added TTFT = first streamed text at the client − the stub's TTFT. The /v1 clients call as Open
WebUI does: the whole history on every call, no header. Three users: one on the websocket, two
through /v1 asking the same things, a new one and one with `--memories` memories.

Run: .venv/bin/python -m bench.api_ttft [--turns 60] [--memories 10000]

`--memories N` gives the second /v1 user N memories first (random unit vectors, six words each
from bench.retrieval's 26-word vocabulary), and every /v1 turn asks about three of those words,
so the message's words are in about half of the memories: issue #29's heavy user, compared turn
by turn with the new user in the same run. With N = 0 the two /v1 users show the run's noise.
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
import websockets
from asgiref.sync import sync_to_async

from bench._harness import cpu_reference_ms, free_port, start_up, stop_up, summary, wait_for_page
from bench.turn_overhead import STUB_TTFT, _serve_stub, _setup_users, ws_turn

WARM_UP = 5
THINK = 0.5
# The two /v1 users: a new one, and one given `--memories` memories.
NEW = "new user"
HEAVY = "user with memories"


def _api_key(username: str) -> str:
    from django.contrib.auth import get_user_model

    from apps.accounts.services import api_key_create

    _, secret = api_key_create(user=get_user_model().objects.get(username=username), name="bench")
    return secret


async def _sdk_turn(client: openai.AsyncOpenAI, messages: list[dict]) -> tuple[float, str]:
    """One streamed call with the whole history, as Open WebUI makes it: its TTFT beyond the
    stub's, in ms, and the answer."""
    sent = time.perf_counter()
    first = None
    text = ""
    stream = await client.chat.completions.create(model="thalamus", messages=messages, stream=True)
    async for chunk in stream:
        delta = chunk.choices[0].delta.content if chunk.choices else None
        if delta and first is None:
            first = time.perf_counter()
        text += delta or ""
    return (first - sent - STUB_TTFT) * 1000, text


def _heavy(username: str, memories: int) -> None:
    """`memories` current memories for the user, written as a bulk load would."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection

    from bench.retrieval import vocabulary

    owner = get_user_model().objects.get(username=username)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memory_memorynode
                (owner_id, description, kind, topic, fact_key, state, confidence_score,
                 importance, origin_context, embedding_status, embedding_model, embedding,
                 created_at)
            SELECT %(owner)s,
                   (SELECT string_agg(word, ' ')
                      FROM (SELECT (%(words)s::text[])[1 + floor(random() * 26)::int] AS word
                              FROM generate_series(1, 6) WHERE g > 0) AS six),
                   'fact', '', '', 'promoted', 1, 0.5, '', 'ready', 'bench',
                   (SELECT l2_normalize(array_agg(random() - 0.5)::vector)
                      FROM generate_series(1, %(dim)s) WHERE g > 0),
                   now() - g * interval '1 minute'
              FROM generate_series(1, %(count)s) AS g
            """,
            {
                "owner": owner.pk,
                "words": vocabulary(26),
                "dim": settings.THALAMUS_EMBED_DIM,
                "count": memories,
            },
        )
        cursor.execute("VACUUM ANALYZE memory_memorynode")


def asks(turn: int) -> str:
    """Three of the heavy user's words, a different three each turn."""
    from bench.retrieval import vocabulary

    words = vocabulary(26)
    return " and ".join(words[(turn * 3 + i) % len(words)] for i in range(3))


async def _interleaved(
    port: int, user: tuple[str, int], secrets: dict[str, str], stub_url: str, turns: int
) -> dict:
    """A websocket turn, then a /v1 turn of each /v1 user (`secrets`: their keys by label),
    then the next round: all paths see the same machine, so a busy moment costs all. Before
    the /v1 calls, the round trip of an authenticated GET /v1/models (the HTTP, middleware and
    key check every call pays before its turn starts); after each, the same SDK call straight
    to the stub: the SDK's own cost at that history's length, which grows with it (it checks
    and copies every message before sending)."""
    session_key, conversation_id = user
    uri = f"ws://127.0.0.1:{port}/ws/c/{conversation_id}/"
    headers = {"Cookie": f"sessionid={session_key}", "Origin": f"http://127.0.0.1:{port}"}
    clients = {
        label: openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key=secret, max_retries=0, timeout=30
        )
        for label, secret in secrets.items()
    }
    direct = openai.AsyncOpenAI(base_url=stub_url, api_key="bench", max_retries=0, timeout=30)
    found: dict[str, list[float]] = {"websocket": [], "/v1/models": []}
    histories: dict[str, list[dict]] = {label: [] for label in clients}
    async with websockets.connect(uri, additional_headers=headers, max_size=None) as ws:
        for turn in range(turns):
            sent, first, _ = await ws_turn(ws, turn)
            found["websocket"].append((first - sent - STUB_TTFT) * 1000)
            await asyncio.sleep(THINK)  # as a user reads the answer
            listed = time.perf_counter()
            await next(iter(clients.values())).models.list()
            found["/v1/models"].append((time.perf_counter() - listed) * 1000)
            for label, client in clients.items():
                history = histories[label]
                history.append({"role": "user", "content": f"turn {turn} hello {asks(turn)}"})
                through, text = await _sdk_turn(client, history)
                straight = (await _sdk_turn(direct, history))[0]
                found.setdefault(label, []).append(through - straight)
                history.append({"role": "assistant", "content": text})
                await asyncio.sleep(THINK)
    for client in clients.values():
        await client.close()
    await direct.close()
    return {label: values[WARM_UP:] for label, values in found.items()}


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
        for name, ms in trace.get("timings_ms", {}).items():
            steps.setdefault(name, []).append(ms)
        for part, value in trace.items():
            timings = value.get("timings_ms", {}) if isinstance(value, dict) else {}
            for name, ms in timings.items():
                steps.setdefault(f"{part}.{name}", []).append(ms)
    return ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in steps.items())


async def _run(
    port: int, users: list[tuple[str, int]], secrets: dict[str, str], stub_url: str, turns: int
) -> None:
    print(f"CPU reference (cpu_reference_ms): {cpu_reference_ms():.0f} ms", flush=True)
    found = await _interleaved(port, users[0], secrets, stub_url, turns)
    new, heavy = found[NEW], found[HEAVY]
    lines = [
        f"websocket: added TTFT {summary(found['websocket'])}",
        f"/v1 stream, {NEW}: added TTFT (through Thalamus − straight to the stub) {summary(new)}",
        f"/v1 stream, {HEAVY}: added TTFT {summary(heavy)}",
        f"/v1 {HEAVY} − {NEW}, turn by turn: "
        f"{summary([h - n for h, n in zip(heavy, new, strict=True)])}",
        f"/v1 {NEW} − websocket, turn by turn: "
        f"{summary([n - w for n, w in zip(new, found['websocket'], strict=True)])}",
        f"/v1/models round trip (the key checked, no turn): {summary(found['/v1/models'])}",
    ]
    print("\n".join(lines), flush=True)
    for label, username in (("websocket", "bench0"), (NEW, "bench2"), (HEAVY, "bench1")):
        ends = await sync_to_async(_server_side)(username)
        print(f"{label}: server-side medians, ms from the turn's start: {ends}", flush=True)


def main() -> None:
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument(
        "--memories", type=int, default=0, help="the memories of the second /v1 user"
    )
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    control, stub_end = context.Pipe()
    stub = context.Process(target=_serve_stub, args=(args.turns * 8, 40, stub_end), daemon=True)
    stub.start()
    stub_url = control.recv()
    with tempfile.TemporaryDirectory(prefix="thalamus-api-ttft-") as tmp:
        data_dir = Path(tmp) / "data"
        port = free_port()
        process = start_up(data_dir, port, Path(tmp) / "up.log", THALAMUS_LLM_BASE_URL=stub_url)
        try:
            wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", process)
            users = _setup_users(data_dir, 3)
            secrets = {NEW: _api_key("bench2"), HEAVY: _api_key("bench1")}
            if args.memories:
                started = time.perf_counter()
                _heavy("bench1", args.memories)
                seconds = time.perf_counter() - started
                print(f"{args.memories} memories for bench1 in {seconds:.0f} s", flush=True)
            asyncio.run(_run(port, users, secrets, stub_url, args.turns))
        finally:
            stop_up(process)
            control.send("stop")
            stub.join(10)
    sys.exit(0)


if __name__ == "__main__":
    main()
