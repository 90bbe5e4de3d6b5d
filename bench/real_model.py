"""What a user of a real local model waits for and what Thalamus remembers, turn by turn.

llama-server (--jinja -c 4096; `--slots N` gives it -np N, else its default 4 slots) serves
SmolLM2-135M-Instruct on this machine's CPU (`make real-llm` builds it); the embeddings come from
the stub, which answers at once. Thalamus runs whole (`manage.py up`: web, Celery worker and
beat, embedded Postgres and Redis). Each conversation (issue 26's eight messages and four more,
or those of a YAML file such as bench/real_memory_conversations.yaml, each by a user of its own)
goes through /v1 (the official openai SDK, streaming, the whole history each call, as Open WebUI
sends it), a message every `--pace` seconds.

For each turn: the hold (the message's arrival to the answer's request: the answer span's start
in the reply's trace), the time to first token through Thalamus, and straight to the same server
with the same history once it is idle (every history of the conversation sent again, one after
another, after the conversation's background work is done: the model alone), the requests the
server had in hand when the message was sent (llama.cpp's requests_processing and
requests_deferred: background work, since the previous answer had ended), and from Thalamus's
/metrics in the turn's interval (to the next message; the last one's to the end of the quiet
period) the background LLM requests and how many of them the chat preempted. Also the prompt
tokens the server evaluated for our answer (llama.cpp's timings.prompt_n) against the new
message's tokens plus the note memory put before it plus 64 (issue 26's target, from turn 4
on), and the facts remembered once every turn is reflected on.

Run: .venv/bin/python -m bench.real_model [--pace 10] [--quiet-seconds 20] [--slots 1]
     [--threads 1] [--conversations bench/real_memory_conversations.yaml] [--only en-radek]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import httpx
import openai
import yaml
from asgiref.sync import sync_to_async

from bench import _llama
from bench._harness import cpu_reference_ms, summary
from bench.real_llm_turn import CONVERSATION as ISSUE_CONVERSATION
from bench.real_llm_turn import MAX_TOKENS, _ttft, quiet_logs, real_stack
from bench.real_memory import _idle, _memories, _score, _unreflected, _user

# Issue 26's eight messages and four more: at a message every 10 s, two minutes of chat.
CONVERSATION = {
    "id": "laura",
    "turns": [
        *ISSUE_CONVERSATION,
        "My son Marco plays the violin in the school orchestra.",
        "We have a cat called Pepe.",
        "What instrument does Marco play?",
        "Thanks, that is all for now.",
    ],
    # The five facts issue 26's user states, and two more, each as words a memory must hold.
    "facts": [
        {"fact": "name", "any": [["laura"]]},
        {"fact": "city", "any": [["turin"]]},
        {"fact": "job", "any": [["carpenter"]]},
        {"fact": "short answers", "any": [["short"]]},
        {"fact": "Sofia's allergy", "any": [["sofia", "peanut"]]},
        {"fact": "Marco's violin", "any": [["marco", "violin"]]},
        {"fact": "the cat", "any": [["pepe"]]},
    ],
    "decoys": [],
}
METRICS_TOKEN = "bench-real-model-metrics"
# The answer's role; the router's model now only runs the world modifier, after the answer.
FOREGROUND = {"chat"}
# Issue 26's target: from turn 4 on, the server evaluates at most the new message, its note
# and this many tokens more (the template's markers, the previous answer's end).
SLACK = 64
REFLECTION_WAIT_SECONDS = 300
METRIC_LINE = re.compile(r"^thalamus_llm_(requests|tokens|errors)_total\{(.*)\} ([0-9.e+]+)$")


def _metrics(port: int) -> dict[tuple[str, str], float]:
    """Thalamus's LLM requests, tokens and preemptions so far:
    (foreground|background, requests|tokens|preempted)."""
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
        if what == "errors":
            if 'kind="preempted"' in labels:
                totals[(side, "preempted")] += float(value)
            continue
        totals[(side, what)] += float(value)
    return totals


def _in_hand(server: _llama.RealServer) -> int:
    """The requests llama-server is generating or holding back for a slot."""
    return int(server.metric("requests_processing") + server.metric("requests_deferred"))


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


async def _converse(
    port: int, server: _llama.RealServer, conversation: dict, pace: float
) -> tuple[list[dict], dict]:
    """One conversation through Thalamus, its quiet period, then its histories straight to the
    idle server; the turns' rows and the conversation's totals."""
    username = f"rm-{conversation['id']}"
    await _idle(server)
    secret = await sync_to_async(_user)(username)
    ours = openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key=secret, max_retries=0, timeout=600
    )
    history: list[dict] = []
    histories: list[list[dict]] = []
    rows = []
    marks = []
    last_sent = 0.0
    for index, said in enumerate(conversation["turns"], start=1):
        wait = last_sent + pace - time.monotonic()
        if wait > 0 and index > 1:
            await asyncio.sleep(wait)
        in_hand = await sync_to_async(_in_hand)(server)
        marks.append(await sync_to_async(_metrics)(port))
        last_sent = time.monotonic()
        history.append({"role": "user", "content": said})
        histories.append(list(history))
        ours_ms, text, _ = await _ttft(ours, "thalamus", history)
        history.append({"role": "assistant", "content": text})
        turn = (await sync_to_async(_turns)(username))[-1]
        new = await sync_to_async(_tokens)(server, said)
        note = await sync_to_async(_tokens)(server, turn["note"]) if turn["note"] else 0
        rows.append(
            {
                "turn": index,
                "hold_ms": turn["request_ms"],
                "ours_ms": ours_ms,
                "in_hand": in_hand,
                "evaluated": turn["evaluated"],
                "prompt": turn["prompt_tokens"],
                "allowed": new + note + SLACK,
                "answer_chars": len(text),
            }
        )
        print(
            f"  {conversation['id']} turn {index}: hold {turn['request_ms'] or 0:.0f} ms, TTFT "
            f"{ours_ms:.0f} ms, {in_hand} in hand at send",
            flush=True,
        )
    await ours.close()
    quiet_from = time.monotonic()
    while time.monotonic() - quiet_from < REFLECTION_WAIT_SECONDS:
        if not await sync_to_async(_unreflected)(username):
            break
        await asyncio.sleep(2)
    reflected_after = time.monotonic() - quiet_from
    left = await sync_to_async(_unreflected)(username)
    await _idle(server)
    marks.append(await sync_to_async(_metrics)(port))
    for row, before, after in zip(rows, marks[:-1], marks[1:], strict=True):
        delta = {key: after[key] - before.get(key, 0) for key in after}
        row["bg"] = delta.get(("background", "requests"), 0)
        row["preempted"] = delta.get(("background", "preempted"), 0)
    direct = openai.AsyncOpenAI(base_url=server.url, api_key="none", max_retries=0, timeout=600)
    for row, sent in zip(rows, histories, strict=True):
        row["straight_ms"] = await _straight(direct, sent)
        row["ratio"] = row["ours_ms"] / row["straight_ms"]
    await direct.close()
    memories = await sync_to_async(_memories)(username)
    score = _score(conversation, memories)
    totals = {
        "id": conversation["id"],
        "turns": len(rows),
        "median_ratio": statistics.median(row["ratio"] for row in rows),
        "max_ratio": max(row["ratio"] for row in rows),
        "max_hold": max(row["hold_ms"] or 0 for row in rows),
        "bg_per_turn": sum(row["bg"] for row in rows) / len(rows),
        "preempted_per_turn": sum(row["preempted"] for row in rows) / len(rows),
        "remembered": sum(score["remembered"].values()),
        "stated": len(score["remembered"]),
        "reflected_after": reflected_after,
        "unreflected": left,
        "missed": [fact for fact, hit in score["remembered"].items() if not hit],
    }
    return rows, totals


async def _straight(direct: openai.AsyncOpenAI, history: list[dict]) -> float:
    """TTFT of `history` straight to the server; asked again after a dropped connection (seen
    once: llama-server closed a fresh connection without a response)."""
    for attempt in range(3):
        try:
            ms, _, _ = await _ttft(direct, _llama.MODEL_NAME, history)
            return ms
        except openai.APIConnectionError as error:
            print(f"  straight request failed ({error}); again", flush=True)
            await asyncio.sleep(2 * (attempt + 1))
    raise RuntimeError("llama-server stopped answering")


def _report(conversation: dict, rows: list[dict], totals: dict) -> None:
    print(f"\n== {conversation['id']}")
    print(
        "turn | hold ms | TTFT ours ms | TTFT straight (idle) ms | ratio | in hand at send "
        "| bg requests | preempted | evaluated / prompt | allowed (msg+note+64) | answer chars"
    )
    for row in rows:
        print(
            f"{row['turn']:>4} | {row['hold_ms'] or 0:>7.0f} | {row['ours_ms']:>12.0f} | "
            f"{row['straight_ms']:>23.0f} | {row['ratio']:>5.2f} | {row['in_hand']:>15} | "
            f"{row['bg']:>11.0f} | {row['preempted']:>9.0f} | "
            f"{row['evaluated']!s:>9} / {row['prompt']!s:<6} | {row['allowed']:>21} | "
            f"{row['answer_chars']}"
        )
    late = [row for row in rows if row["turn"] >= 4 and row["evaluated"] is not None]
    met = sum(row["evaluated"] <= row["allowed"] for row in late)
    print(f"evaluated within the new message + note + {SLACK}, from turn 4: {met} of {len(late)}")
    print(
        f"reflected {totals['reflected_after']:.0f} s after the last message; replies not "
        f"reflected: {totals['unreflected']}; facts remembered {totals['remembered']}/"
        f"{totals['stated']}"
        + (f" (missed: {', '.join(totals['missed'])})" if totals["missed"] else "")
    )
    sys.stdout.flush()


async def _run(port: int, server: _llama.RealServer, conversations: list[dict], pace: float) -> int:
    every_turn: list[dict] = []
    summaries = []
    for conversation in conversations:
        rows, totals = await _converse(port, server, conversation, pace)
        _report(conversation, rows, totals)
        every_turn += rows
        summaries.append(totals)
    print(f"\nCPU reference (cpu_reference_ms): {cpu_reference_ms():.0f} ms")
    print(f"pace: a message every {pace:g} s; answers capped at {MAX_TOKENS} tokens")
    print(
        "conversation | turns | TTFT ratio median | max | hold max ms | bg requests / turn "
        "| preempted / turn | facts remembered"
    )
    for totals in summaries:
        print(
            f"{totals['id']} | {totals['turns']} | {totals['median_ratio']:.2f} | "
            f"{totals['max_ratio']:.2f} | {totals['max_hold']:.0f} | "
            f"{totals['bg_per_turn']:.2f} | {totals['preempted_per_turn']:.2f} | "
            f"{totals['remembered']}/{totals['stated']}"
        )
    print(f"hold, every turn: {summary([row['hold_ms'] or 0 for row in every_turn])}")
    print(f"TTFT through Thalamus: {summary([row['ours_ms'] for row in every_turn])}")
    print(f"TTFT straight, idle: {summary([row['straight_ms'] for row in every_turn])}")
    print(
        "turns with background in hand at send: "
        f"{sum(row['in_hand'] > 0 for row in every_turn)} of {len(every_turn)}"
    )
    return 0 if all(not totals["unreflected"] for totals in summaries) else 1


def main() -> None:
    quiet_logs()
    parser = argparse.ArgumentParser()
    parser.add_argument("--pace", type=float, default=10.0, help="seconds between messages")
    parser.add_argument(
        "--quiet-seconds", type=int, default=None, help="reflection_quiet_seconds to set"
    )
    parser.add_argument("--slots", type=int, default=0, help="llama-server -np; 0: its default")
    parser.add_argument(
        "--conversations", type=Path, help="a YAML file of conversations (real_memory's shape)"
    )
    parser.add_argument("--only", action="append", help="a conversation id (repeatable)")
    parser.add_argument(
        "--threads", type=int, default=2, help="llama-server --threads (1 on a shared CPU)"
    )
    args = parser.parse_args()
    conversations = (
        yaml.safe_load(args.conversations.read_text()) if args.conversations else [CONVERSATION]
    )
    if args.only:
        conversations = [c for c in conversations if c["id"] in args.only]
    with real_stack(
        "thalamus-real-model-",
        slots=args.slots or None,
        threads=args.threads,
        THALAMUS_METRICS_TOKEN=METRICS_TOKEN,
    ) as (port, server):
        if args.quiet_seconds is not None:
            _set_quiet(args.quiet_seconds)
        code = asyncio.run(_run(port, server, conversations, args.pace))
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
