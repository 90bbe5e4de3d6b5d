"""What a user waits for with a real local model: an ordinary conversation through Thalamus's
/v1 (the official openai SDK, streaming, the whole history each call, as Open WebUI sends it)
against the same conversation sent straight to the same llama.cpp server.

llama-server (--jinja -c 4096) serves SmolLM2-135M-Instruct on this machine's CPU
(`make real-llm` builds it); the embeddings come from the stub, which answers at once. For each
turn: time to first token at the client both ways, the server's prompt tokens both ways, and
the LLM calls Thalamus made before the answer's (router, tool rounds, world modifier, read from
the reply's trace), and the time from the message's arrival to the answer's request (its span).
Background reflection runs as it would, on the same server.

Run: .venv/bin/python -m bench.real_llm_turn [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import openai
from asgiref.sync import sync_to_async

from bench import _llama
from bench._harness import cpu_reference_ms, free_port, start_up, stop_up, summary, wait_for_page
from bench.api_ttft import _api_key
from bench.turn_overhead import _setup_users
from llm_stub import StubServer

CONVERSATION = [
    "My name is Laura Bianchi and I live in Turin.",
    "I work as a carpenter, mostly making tables and chairs.",
    "I prefer short answers, please.",
    "My daughter Sofia is allergic to peanuts.",
    "What is my name?",
    "Where do I live?",
    "Can Sofia eat a peanut butter sandwich?",
    "What do I do for a living?",
]
MAX_TOKENS = 48


async def _ttft(
    client: openai.AsyncOpenAI, model: str, messages: list[dict]
) -> tuple[float, str, int | None]:
    """Time to the first text, the answer, and the prompt tokens the server reported."""
    sent = time.perf_counter()
    first = None
    text = ""
    prompt_tokens = None
    stream = await client.chat.completions.create(
        model=model,
        messages=messages,
        stream=True,
        max_tokens=MAX_TOKENS,
        stream_options={"include_usage": True},
    )
    async for chunk in stream:
        delta = chunk.choices[0].delta.content if chunk.choices else None
        if delta and first is None:
            first = time.perf_counter()
        text += delta or ""
        if chunk.usage is not None:
            prompt_tokens = chunk.usage.prompt_tokens
    return ((first or time.perf_counter()) - sent) * 1000, text, prompt_tokens


def _replies(username: str) -> list[dict]:
    from apps.chat.models import Message

    rows = Message.objects.filter(
        role="assistant", conversation__owner__username=username
    ).order_by("pk")
    found = []
    for reply in rows:
        trace = reply.trace
        before = int(trace.get("route", {}).get("by") == "model")
        before += (trace.get("tools") or {}).get("rounds", 0)
        before += int("world" in trace)
        # The answer's span starts as its request goes out, in ms from the message's arrival.
        sent = next(
            (span["start_ms"] for span in trace.get("spans", []) if span["name"] == "answer"), None
        )
        found.append(
            {
                "calls_before": before,
                "prompt_tokens": reply.prompt_tokens,
                "status": reply.status,
                "request_ms": sent,
            }
        )
    return found


async def _run(port: int, secret: str, server: _llama.RealServer, rounds: int) -> None:
    ours = openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key=secret, max_retries=0, timeout=300
    )
    direct = openai.AsyncOpenAI(base_url=server.url, api_key="none", max_retries=0, timeout=300)
    through, straight, direct_prompt = [], [], []
    for _ in range(rounds):
        history: list[dict] = []
        for said in CONVERSATION:
            history.append({"role": "user", "content": said})
            ms, text, _ = await _ttft(ours, "thalamus", history)
            through.append(ms)
            ms, _, prompt_tokens = await _ttft(direct, _llama.MODEL_NAME, history)
            straight.append(ms)
            direct_prompt.append(prompt_tokens or 0)
            history.append({"role": "assistant", "content": text})
    await ours.close()
    await direct.close()
    replies = await sync_to_async(_replies)("bench0")
    calls = [reply["calls_before"] for reply in replies]
    ratios = [a / b for a, b in zip(through, straight, strict=True)]
    print(f"CPU reference (cpu_reference_ms): {cpu_reference_ms():.0f} ms")
    print(f"turns: {len(through)}; replies saved: {len(replies)}")
    print(f"TTFT through Thalamus /v1: {summary(through)}")
    print(f"TTFT straight to llama-server: {summary(straight)}")
    print(f"ratio turn by turn (through / straight): median {statistics.median(ratios):.2f}")
    sent = [r["request_ms"] for r in replies if r["request_ms"] is not None]
    print(f"message to the answer's request, server side: {summary(sent)}")
    print(
        f"LLM calls before the answer: {sum(c > 0 for c in calls)} of {len(calls)} turns, "
        f"{sum(calls)} calls in all"
    )
    print(
        "answer's prompt tokens (the server's count): through Thalamus median "
        f"{statistics.median(r['prompt_tokens'] or 0 for r in replies):.0f}, straight "
        f"median {statistics.median(direct_prompt):.0f}"
    )


@contextlib.contextmanager
def real_stack(
    prefix: str, *, slots: int | None = None, threads: int = 2, **env: str
) -> Iterator[tuple[int, _llama.RealServer]]:
    """The real llama-server (`slots`: its -np; `threads`: its --threads), the stub's embeddings
    and `manage.py up` on a throwaway data dir pointed at them, with one user (bench0); yields
    up's port and the server."""
    llama, server = _llama.start(4096, slots=slots, threads=threads)
    stub = StubServer(port=0).start()
    try:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            data_dir = Path(tmp) / "data"
            port = free_port()
            process = start_up(
                data_dir,
                port,
                Path(tmp) / "up.log",
                THALAMUS_LLM_BASE_URL=server.url,
                THALAMUS_CHAT_MODEL=_llama.MODEL_NAME,
                THALAMUS_EMBED_BASE_URL=stub.url,
                **env,
            )
            try:
                wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", process)
                _setup_users(data_dir, 1)
                yield port, server
            finally:
                stop_up(process)
    finally:
        stub.stop()
        _llama.stop(llama)


def quiet_logs() -> None:
    logging.basicConfig(level=logging.WARNING)
    for name in ("httpx", "httpx2", "thalamus.llm_stub"):
        logging.getLogger(name).setLevel(logging.WARNING)


def main() -> None:
    quiet_logs()
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with real_stack("thalamus-real-llm-") as (port, server):
        asyncio.run(_run(port, _api_key("bench0"), server, args.rounds))
    sys.exit(0)


if __name__ == "__main__":
    main()
