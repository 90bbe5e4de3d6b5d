"""Answers that end: how long SmolLM2-135M's answers run, and how long they hold the one slot,
without and with what stops a loop.

llama-server (--jinja -c 4096 -np 1, 2 threads) serves SmolLM2-135M-Instruct on this machine's
CPU (`make real-llm` builds it). Each prompt is a short conversation whose last turn is one a
small model tends to loop on. It is streamed straight to the server three ways:

- before: no sampler fields, and only exact copies stop it (the loop check before #38);
- sampler: llama.cpp's DRY sampler and repeat penalty as the answer now sends them
  (`streaming.REPEATS_AVOIDED`), the exact check only;
- after: the sampler, and the check of `runaway.repeated_tail` (exact and near repeats) run as
  the answer runs it, every LOOP_CHECK_CHARS; a loop closes the stream.

Per prompt and way: the characters kept, the tokens generated, the seconds the slot was held and
how it ended (stop, length, loop). A fixed seed per prompt, the chat's default temperature.

Run: .venv/bin/python -m bench.answer_loops [--seeds 2] [--max-tokens 1024] [--prompts 6]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import django
import httpx

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")
django.setup()

from apps.cognition.answer import LOOP_CHECK_CHARS  # noqa: E402
from apps.cognition.runaway import _exact_loop, repeated_tail  # noqa: E402
from apps.core.llm.streaming import REPEATS_AVOIDED  # noqa: E402
from bench import _llama  # noqa: E402

SYSTEM = "You are a helpful assistant. Today is 2026-11-27. The user's name is Laura."
CONVERSATIONS = [
    [
        "Hi! I'm new here.",
        "Hello Laura! Welcome. How can I help you today?",
        "Thanks, nice to have you.",
    ],
    ["Hello", "Hi! How can I help?", "Tell me about yourself and why you like helping people."],
    [
        "Good morning!",
        "Good morning! What can I do for you?",
        "I just wanted to say hi and thank you.",
    ],
    ["Write a short poem about the sea."],
    ["What is your favourite colour, and why?"],
    ["Give me five tips for sleeping better."],
]
MAX_TOKENS = 1024
TEMPERATURE = 0.7
WAYS = {
    "before": ({}, _exact_loop),
    "sampler": (REPEATS_AVOIDED["llama.cpp"], _exact_loop),
    "after": (REPEATS_AVOIDED["llama.cpp"], repeated_tail),
}


def _messages(turns: list[str]) -> list[dict]:
    roles = ["user", "assistant"]
    return [{"role": "system", "content": SYSTEM}] + [
        {"role": roles[i % 2], "content": text} for i, text in enumerate(turns)
    ]


def answer(
    server: _llama.RealServer,
    turns: list[str],
    *,
    fields: dict,
    check,
    seed: int,
    max_tokens: int = MAX_TOKENS,
):
    """One answer streamed until it ends or `check` finds a loop (the stream is then closed)."""
    body = {
        "model": _llama.MODEL_NAME,
        "messages": _messages(turns),
        "max_tokens": max_tokens,
        "temperature": TEMPERATURE,
        "seed": seed,
        "stream": True,
        **fields,
    }
    written, tokens, unchecked, ended = "", 0, 0, "cut"
    started = time.monotonic()
    with httpx.stream("POST", f"{server.url}/chat/completions", json=body, timeout=300) as reply:
        for line in reply.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choice = (json.loads(line[6:]).get("choices") or [{}])[0]
            delta = (choice.get("delta") or {}).get("content") or ""
            if delta:
                tokens += 1
                written += delta
                unchecked += len(delta)
                if unchecked >= LOOP_CHECK_CHARS:
                    unchecked = 0
                    cut = check(written)
                    if cut is not None:
                        written, ended = written[:cut], "loop"
                        break
            if choice.get("finish_reason"):
                ended = choice["finish_reason"]
    return {
        "chars": len(written),
        "tokens": tokens,
        "seconds": time.monotonic() - started,
        "ended": ended,
        "text": written,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    parser.add_argument("--prompts", type=int, default=len(CONVERSATIONS))
    parser.add_argument("--show", action="store_true", help="print each answer's start")
    args = parser.parse_args()
    process, server = _llama.start(4096, slots=1)
    rows: dict[str, list[dict]] = {way: [] for way in WAYS}
    try:
        for index, turns in enumerate(CONVERSATIONS[: args.prompts]):
            for seed in range(args.seeds):
                for way, (fields, check) in WAYS.items():
                    result = answer(
                        server,
                        turns,
                        fields=fields,
                        check=check,
                        seed=seed,
                        max_tokens=args.max_tokens,
                    )
                    rows[way].append(result)
                    print(
                        f"#{index + 1} seed {seed} {way:<8} {result['chars']:>5} ch "
                        f"{result['tokens']:>4} tok {result['seconds']:6.1f} s {result['ended']}",
                        flush=True,
                    )
                    if args.show:
                        print(f"  [{way}] {result['text'][:300]!r}", file=sys.stderr, flush=True)
    finally:
        _llama.stop(process)
    print()
    print(
        f"{'way':<8} {'answers':>7} {'median ch':>9} {'max ch':>6} {'median s':>8} "
        f"{'max s':>6} {'total s':>7} {'loops':>5} {'length':>6}"
    )
    for way, results in rows.items():
        chars = [r["chars"] for r in results]
        seconds = [r["seconds"] for r in results]
        print(
            f"{way:<8} {len(results):>7} {statistics.median(chars):>9.0f} {max(chars):>6} "
            f"{statistics.median(seconds):>8.1f} {max(seconds):>6.1f} {sum(seconds):>7.1f} "
            f"{sum(r['ended'] == 'loop' for r in results):>5} "
            f"{sum(r['ended'] == 'length' for r in results):>6}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
