"""The latency the internal debate (CLAM §4) adds to a turn, on the LLM stub.

    .venv/bin/python -m bench.debate [--turns 20] [--ttft 0.3] [--tps 50] [--tokens 60]

Drives `answer_reply` directly (the real turn: recall, prompt, HTTP to the stub, saves) on its own
database in the embedded PostgreSQL, for three cases: the debate off (one streamed answer), on
with a draft that breaks no rule (draft, review, the draft shown), and on with a rewrite (draft,
review, streamed rewrite). The stub answers like a local model: `--ttft` before the first
token, then `--tps` tokens a second, `--tokens` tokens an answer; a non-streamed reply (the
draft) comes whole after the time the same answer would take to stream. The review's JSON is
streamed at the same rate. Reported per case: the time to the first text the user sees, and
to the answer's end, median and p95.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from bench._harness import django_on_fresh_database, summary

BENCH_DATABASE = "thalamus_bench_debate"
INSTANCE = "bench-debate"
RULE = "Always answer in Italian"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20, help="turns per case")
    parser.add_argument("--ttft", type=float, default=0.3, help="the stub's time to first token")
    parser.add_argument("--tps", type=float, default=50.0, help="the stub's tokens a second")
    parser.add_argument("--tokens", type=int, default=60, help="tokens an answer")
    return parser.parse_args()


def setup_django(llm_url: str) -> None:
    django_on_fresh_database(
        database=BENCH_DATABASE,
        instance=INSTANCE,
        llm_url=llm_url,
        quiet=("apps.cognition.answer", "apps.cognition.turn_request"),
    )


def _user():
    from django.contrib.auth import get_user_model

    from apps.core.models import RuntimeConfig
    from apps.core.selectors import forget_runtime_config
    from apps.memory import services as memory_services

    config = RuntimeConfig.objects.order_by("pk").first() or RuntimeConfig()
    config.turns_per_minute = 0
    config.save()
    forget_runtime_config()
    user = get_user_model().objects.create_user("bench-debate")
    memory_services.memory_node_create(
        owner=user, description=RULE, kind="rule", embed=False, source="admin"
    )
    return user


def _set_debate(enabled: bool) -> None:
    from apps.core.models import RuntimeConfig
    from apps.core.selectors import forget_runtime_config

    RuntimeConfig.objects.update(debate_enabled=enabled)
    forget_runtime_config()


def _ask(user) -> int:
    from apps.chat import services
    from apps.chat.models import Conversation

    conversation = Conversation.objects.create(owner=user)
    return services.message_send(conversation=conversation, content="Tell me about Rome.").reply.pk


def _script(stub, case: str, args: argparse.Namespace) -> None:
    answer = " ".join(f"word{n}" for n in range(args.tokens))
    streamed = {"content": answer, "ttft": args.ttft, "tps": args.tps}
    if case == "off":
        stub.script(streamed)
        return
    # Not streamed, the draft comes whole once it is all generated.
    stub.script({"content": answer, "ttft": args.ttft + (args.tokens - 1) / args.tps})
    rewrite = case == "rewrite"
    stub.script(
        {
            "json": {
                "violations": ["It is in English; the user wants Italian."] if rewrite else [],
                "verdict": "rewrite" if rewrite else "ok",
                "critique": "Answer in Italian." if rewrite else "",
            },
            "match": "antagonistic reviewer",
            "ttft": args.ttft,
            "tps": args.tps,
        }
    )
    if rewrite:
        stub.script({**streamed, "match": "A reviewer found"})


async def _turn(reply_id: int) -> tuple[float, float]:
    from apps.cognition.pipeline import answer_saved_reply

    started = time.perf_counter()
    first = None
    async for _ in answer_saved_reply(reply_id=reply_id):
        if first is None:
            first = time.perf_counter()
    return (first - started) * 1000, (time.perf_counter() - started) * 1000


def _check(reply_id: int, case: str) -> None:
    from apps.chat.models import Message

    reply = Message.objects.get(pk=reply_id)
    rewritten = reply.trace.get("debate", {}).get("rewritten")
    if reply.status != "complete" or rewritten != {"off": None, "ok": False, "rewrite": True}[case]:
        sys.exit(f"case {case}: unexpected reply {reply.status} {reply.trace.get('debate')}")


async def _run(stub, args: argparse.Namespace) -> dict[str, tuple[list[float], list[float]]]:
    """Every turn in one event loop, as in the web process (its connections are per loop)."""
    from asgiref.sync import sync_to_async

    user = await sync_to_async(_user)()
    results = {}
    for case in ("off", "ok", "rewrite"):
        await sync_to_async(_set_debate)(case != "off")
        firsts, totals = [], []
        for turn in range(args.turns + 1):
            reply_id = await sync_to_async(_ask)(user)
            _script(stub, case, args)
            first, total = await _turn(reply_id)
            await sync_to_async(_check)(reply_id, case)
            if turn:  # the first warms up the case's connections
                firsts.append(first)
                totals.append(total)
        results[case] = (firsts, totals)
    return results


def main() -> None:
    args = parse_args()
    from llm_stub import StubServer

    with StubServer(port=0) as stub:
        setup_django(stub.url)
        results = asyncio.run(_run(stub, args))
    stream_ms = (args.tokens - 1) / args.tps * 1000
    print(
        f"stub: ttft {args.ttft * 1000:.0f} ms, {args.tps:g} tokens/s, {args.tokens}-token "
        f"answers (streaming one takes {args.ttft * 1000 + stream_ms:.0f} ms)"
    )
    labels = {
        "off": "debate off",
        "ok": "debate on, draft kept",
        "rewrite": "debate on, rewritten",
    }
    off_first, off_total = (statistics.median(v) for v in results["off"])
    for case, (firsts, totals) in results.items():
        print(f"{labels[case]}:")
        print(f"  first text   {summary(firsts)}")
        print(f"  answer's end {summary(totals)}")
        if case != "off":
            print(
                f"  added (medians): first text +{statistics.median(firsts) - off_first:.0f} ms, "
                f"answer's end +{statistics.median(totals) - off_total:.0f} ms"
            )


if __name__ == "__main__":
    main()
