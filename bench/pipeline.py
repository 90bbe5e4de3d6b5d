"""What the turn's pipeline (router, spans, tools, world state) adds to a plain answer.

    .venv/bin/python -m bench.pipeline [--turns 200]

On its own database in the embedded PostgreSQL and a zero-latency LLM stub, in one event loop
as in the web process, each round runs four turns on a saved message, in turn:

- plain:       the recall and the prompt (answer.memory_for_turn + build_turn), then the
               answer: the turn as it was before the pipeline;
- fast track:  the pipeline on a greeting: the router's rule answers, no LLM call before the
               answer, tools and world skipped;
- router call: the pipeline on a personal message the rule cannot place: answered directly,
               with no call before the answer (the router's model, when on, reads such a
               message after the answer, for the world modifier);
- tool path:   the pipeline on a sum: the rule routes to the tools, one round calls the
               calculator, a second ends the loop, then the answer.

Reported per case, median and p95: the time from the start of the turn to the answer's
request going out (Thalamus's own work before the LLM), and the pipeline's added cost: each
turn's time minus the plain turn's of the same round.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench._harness import django_on_fresh_database, summary

BENCH_DATABASE = "thalamus_bench_pipeline"
INSTANCE = "bench-pipeline"
CASES = ("plain", "fast track", "router call", "tool path")
TEXTS = {
    "plain": "Hello there!",
    "fast track": "Hello there!",
    "router call": "I wonder whether my sister would like the blue scarf",
    "tool path": "What is 17 * 23?",
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="rounds (each runs every case)")
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
    config.reflection_enabled = False  # the worker is not running; nothing to queue for
    config.save()
    forget_runtime_config()
    user = get_user_model().objects.create_user("bench-pipeline")
    for fact in ("Alice keeps bees in Turin", "Alice's sister likes blue", "Alice plays cello"):
        memory_services.memory_node_create(owner=user, description=fact, source="admin")
    return user


def _ask(user, text: str):
    from apps.chat import services
    from apps.chat.models import Conversation

    conversation = Conversation.objects.create(owner=user)
    sent = services.message_send(conversation=conversation, content=text)
    return conversation, sent.reply, sent.history


def _script(stub, case: str) -> None:
    if case == "tool path":
        stub.script(
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "17 * 23"}}]},
            {"content": "Enough."},
        )
    stub.script({"content": "A short answer."})


async def _turn(stub, user, case: str) -> float:
    """One turn; the milliseconds from its start to the answer's request."""
    from asgiref.sync import sync_to_async
    from channels.db import database_sync_to_async

    from apps.cognition.answer import answer_reply
    from apps.cognition.pipeline import start_turn
    from apps.cognition.turn_memory import memory_for_turn
    from apps.cognition.turn_request import build_turn

    conversation, reply, history = await sync_to_async(_ask)(user, TEXTS[case])
    _script(stub, case)
    requested: list[float] = []
    started = time.perf_counter()
    if case == "plain":

        async def plain():
            memory = await database_sync_to_async(memory_for_turn, thread_sensitive=False)(
                user=user, conversation=conversation, text=TEXTS[case]
            )
            return build_turn(reply=reply, history=history, memory=memory)

        turn = plain()
    else:
        run = start_turn(user=user, conversation=conversation, text=TEXTS[case])
        turn = run.prepare(reply=reply, history=history)
    async for _ in answer_reply(
        reply_id=reply.pk,
        turn=turn,
        on_request=lambda: requested.append(time.perf_counter()),
    ):
        pass
    return (requested[0] - started) * 1000


async def _run(stub, args: argparse.Namespace) -> dict[str, list[float]]:
    from asgiref.sync import sync_to_async

    user = await sync_to_async(_user)()
    own: dict[str, list[float]] = {case: [] for case in CASES}
    for round_ in range(args.turns + 5):
        for case in CASES:
            ms = await _turn(stub, user, case)
            if round_ >= 5:  # the first rounds warm up connections and caches
                own[case].append(ms)
    return own


def main() -> None:
    args = parse_args()
    from llm_stub import StubServer

    with StubServer(port=0) as stub:
        setup_django(stub.url)
        own = asyncio.run(_run(stub, args))
    print(f"zero-latency stub, {args.turns} rounds, one event loop")
    print("own work before the answer's request:")
    for case in CASES:
        print(f"  {case:<12} {summary(own[case])}")
    print("added over the plain turn of the same round:")
    for case in CASES[1:]:
        added = [a - b for a, b in zip(own[case], own["plain"], strict=True)]
        print(
            f"  {case:<12} {summary(added)}; "
            f"p95 {_p95(own[case]) - _p95(own['plain']):+.1f} ms, "
            f"median {statistics.median(own[case]) - statistics.median(own['plain']):+.1f} ms"
        )


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


if __name__ == "__main__":
    main()
