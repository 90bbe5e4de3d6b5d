"""What a user of a real local model waits for and what Thalamus remembers, turn by turn.

llama-server (--jinja -c 4096, its default 4 slots) serves SmolLM2-135M-Instruct on this
machine's CPU (`make real-llm` builds it); the embeddings come from the stub, which answers at
once. Thalamus runs whole (`manage.py up`: web, Celery worker and beat, embedded Postgres and
Redis). A user sends issue 26's eight messages and four more (two minutes of chat at the
default pace) through /v1 (the official openai SDK, streaming, the whole history each call, as
Open WebUI sends it), one every `--pace` seconds; after each of our calls the same history goes
straight to the same server.

For each turn: the time from the message's arrival to the answer's request (the answer span's
start in the reply's trace), the time to first token through Thalamus and straight to the
server, the prompt tokens the server evaluated for our answer (llama.cpp's timings.prompt_n)
against the new message's tokens plus the note memory put before it plus 64 (issue 26's
target, from turn 4 on), Thalamus's LLM requests and tokens in the turn's interval, foreground
(the answer, router, tools) and background (reflection, critic, episode, title), from its own
/metrics, and the memories formed so far. After the last message: how long until every turn
is reflected, and which of the seven facts the user stated were remembered (issue 26's five,
and two more).

Run: .venv/bin/python -m bench.real_model [--pace 10] [--quiet-seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
from collections import defaultdict

import httpx
import openai
from asgiref.sync import sync_to_async

from bench import _llama
from bench._harness import cpu_reference_ms, summary
from bench.api_ttft import _api_key
from bench.real_llm_turn import CONVERSATION as ISSUE_CONVERSATION
from bench.real_llm_turn import MAX_TOKENS, _ttft, quiet_logs, real_stack

# Issue 26's eight messages and four more: at a message every 10 s, two minutes of chat.
CONVERSATION = [
    *ISSUE_CONVERSATION,
    "My son Marco plays the violin in the school orchestra.",
    "We have a cat called Pepe.",
    "What instrument does Marco play?",
    "Thanks, that is all for now.",
]
METRICS_TOKEN = "bench-real-model-metrics"
FOREGROUND = {"chat", "router", "tools", "world"}
# The five facts issue 26's user states, each as words a memory of it must hold.
FACTS = {
    "name": ("laura",),
    "city": ("turin",),
    "job": ("carpenter",),
    "short answers": ("short",),
    "Sofia's allergy": ("sofia", "peanut"),
    "Marco's violin": ("marco", "violin"),
    "the cat": ("pepe",),
}
# Issue 26's target: from turn 4 on, the server evaluates at most the new message, its note
# and this many tokens more (the template's markers, the previous answer's end).
SLACK = 64
METRIC_LINE = re.compile(r"^thalamus_llm_(requests|tokens)_total\{(.*)\} ([0-9.e+]+)$")


def _metrics(port: int) -> dict[tuple[str, str], float]:
    """Thalamus's LLM requests and tokens so far: (foreground|background, requests|tokens)."""
    text = httpx.get(
        f"http://127.0.0.1:{port}/metrics",
        headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
        timeout=10,
    ).text
    totals: dict[tuple[str, str], float] = defaultdict(float)
    for line in text.splitlines():
        match = METRIC_LINE.match(line)
        if not match:
            continue
        what, labels, value = match.groups()
        role = re.search(r'role="([^"]*)"', labels).group(1)
        side = "foreground" if role in FOREGROUND else "background"
        totals[(side, what)] += float(value)
    return totals


def _tokens(server: _llama.RealServer, text: str) -> int:
    return len(
        httpx.post(f"{server.root}/tokenize", json={"content": text}, timeout=10).json()["tokens"]
    )


def _turns(username: str) -> list[dict]:
    from apps.chat.models import Message

    found = []
    for reply in Message.objects.filter(
        role="assistant", conversation__owner__username=username
    ).order_by("pk"):
        trace = reply.trace
        request = next(
            (span["start_ms"] for span in trace.get("spans", []) if span["name"] == "answer"), None
        )
        found.append(
            {
                "request_ms": request,
                "evaluated": (trace.get("prompt_cache") or {}).get("evaluated"),
                "prompt_tokens": reply.prompt_tokens,
                "note": (trace.get("note") or {}).get("text", ""),
                "reflected": "reflection" in trace,
                "calls_before": int((trace.get("route") or {}).get("by") == "model")
                + (trace.get("tools") or {}).get("rounds", 0),
            }
        )
    return found


def _memories(username: str) -> list[str]:
    from apps.memory.models import MemoryNode

    return list(
        MemoryNode.objects.filter(owner__username=username, valid_to=None).values_list(
            "description", flat=True
        )
    )


def _remembered(memories: list[str]) -> dict[str, bool]:
    texts = [memory.casefold() for memory in memories]
    return {
        fact: any(all(word in text for word in words) for text in texts)
        for fact, words in FACTS.items()
    }


async def _run(port: int, secret: str, server: _llama.RealServer, pace: float) -> int:
    ours = openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key=secret, max_retries=0, timeout=300
    )
    direct = openai.AsyncOpenAI(base_url=server.url, api_key="none", max_retries=0, timeout=300)
    history: list[dict] = []
    rows = []
    before = await sync_to_async(_metrics)(port)
    last_sent = 0.0
    for index, said in enumerate(CONVERSATION, start=1):
        wait = last_sent + pace - time.monotonic()
        if wait > 0 and index > 1:
            await asyncio.sleep(wait)
        last_sent = time.monotonic()
        history.append({"role": "user", "content": said})
        ours_ms, text, _ = await _ttft(ours, "thalamus", history)
        straight_ms, _, _ = await _ttft(direct, _llama.MODEL_NAME, history)
        history.append({"role": "assistant", "content": text})
        now = await sync_to_async(_metrics)(port)
        delta = {key: now[key] - before.get(key, 0) for key in now}
        before = now
        turn = (await sync_to_async(_turns)("bench0"))[-1]
        memories = await sync_to_async(_memories)("bench0")
        new = await sync_to_async(_tokens)(server, said)
        note = await sync_to_async(_tokens)(server, turn["note"]) if turn["note"] else 0
        rows.append(
            {
                "turn": index,
                "request_ms": turn["request_ms"],
                "ours_ms": ours_ms,
                "straight_ms": straight_ms,
                "evaluated": turn["evaluated"],
                "prompt": turn["prompt_tokens"],
                "allowed": new + note + SLACK,
                "calls_before": turn["calls_before"],
                "fg": (
                    delta.get(("foreground", "requests"), 0),
                    delta.get(("foreground", "tokens"), 0),
                ),
                "bg": (
                    delta.get(("background", "requests"), 0),
                    delta.get(("background", "tokens"), 0),
                ),
                "memories": len(memories),
            }
        )
    quiet_from = time.monotonic()
    reflected_after = None
    deadline = quiet_from + 300
    while time.monotonic() < deadline:
        turns = await sync_to_async(_turns)("bench0")
        if all(turn["reflected"] for turn in turns):
            reflected_after = time.monotonic() - quiet_from
            break
        await asyncio.sleep(1)
    after = await sync_to_async(_metrics)(port)
    memories = await sync_to_async(_memories)("bench0")
    await ours.close()
    await direct.close()

    print(f"CPU reference (cpu_reference_ms): {cpu_reference_ms():.0f} ms")
    print(f"pace: a message every {pace:g} s; answers capped at {MAX_TOKENS} tokens")
    print(
        "turn | msg->request ms | TTFT ours ms | TTFT straight ms | evaluated / prompt tokens "
        "| allowed (msg+note+64) | LLM calls before | fg req/tok | bg req/tok | memories"
    )
    for row in rows:
        print(
            f"{row['turn']:>4} | {row['request_ms'] or 0:>15.1f} | {row['ours_ms']:>12.0f} | "
            f"{row['straight_ms']:>16.0f} | {row['evaluated']!s:>9} / {row['prompt']!s:<5} | "
            f"{row['allowed']:>21} | {row['calls_before']:>16} | "
            f"{row['fg'][0]:.0f}/{row['fg'][1]:.0f} | {row['bg'][0]:.0f}/{row['bg'][1]:.0f} | "
            f"{row['memories']}"
        )
    ratios = [row["ours_ms"] / row["straight_ms"] for row in rows]
    print(f"message to the answer's request: {summary([r['request_ms'] or 0 for r in rows])}")
    print(f"TTFT through Thalamus: {summary([r['ours_ms'] for r in rows])}")
    print(f"TTFT straight to llama-server: {summary([r['straight_ms'] for r in rows])}")
    print(f"ratio turn by turn: median {statistics.median(ratios):.2f}")
    late = [row for row in rows if row["turn"] >= 4 and row["evaluated"] is not None]
    met = sum(row["evaluated"] <= row["allowed"] for row in late)
    print(f"evaluated within the new message + note + {SLACK}, from turn 4: {met} of {len(late)}")
    print(
        f"turns with an LLM call before the answer: {sum(r['calls_before'] > 0 for r in rows)} "
        f"of {len(rows)}"
    )
    background = (
        after.get(("background", "requests"), 0),
        after.get(("background", "tokens"), 0),
    )
    print(f"background LLM requests / tokens in all: {background[0]:.0f} / {background[1]:.0f}")
    if reflected_after is None:
        print("time to memory after the last message: not every turn reflected within 300 s")
        waiting = [n for n, turn in enumerate(turns, start=1) if not turn["reflected"]]
        print(f"  turns not reflected: {waiting}")
    else:
        print(f"time to memory after the last message: {reflected_after:.1f} s")
    facts = _remembered(memories)
    print(f"facts remembered: {sum(facts.values())} of {len(facts)}: {facts}")
    print("memories:")
    for memory in memories:
        print(f"  - {memory}")
    return 0 if reflected_after is not None else 1


def main() -> None:
    quiet_logs()
    parser = argparse.ArgumentParser()
    parser.add_argument("--pace", type=float, default=10.0, help="seconds between messages")
    parser.add_argument(
        "--quiet-seconds", type=int, default=None, help="reflection_quiet_seconds to set"
    )
    args = parser.parse_args()
    with real_stack("thalamus-real-model-", THALAMUS_METRICS_TOKEN=METRICS_TOKEN) as (
        port,
        server,
    ):
        if args.quiet_seconds is not None:
            _set_quiet(args.quiet_seconds)
        code = asyncio.run(_run(port, _api_key("bench0"), server, args.pace))
    sys.exit(code)


def _set_quiet(seconds: int) -> None:
    from apps.core.models import RuntimeConfig
    from apps.core.selectors import forget_runtime_config

    config = RuntimeConfig.objects.order_by("pk").first()
    config.reflection_quiet_seconds = seconds
    config.save()
    forget_runtime_config()


if __name__ == "__main__":
    main()
