"""Load: websocket users chatting at once through the real stack, at several levels of users.

    .venv/bin/python -m bench.load [--levels 1,10,20,50] [--minutes 1] [--think 0.5] [--burst]
        [--web-processes N]

`manage.py up` (uvicorn, both Celery workers, beat, the embedded PostgreSQL and Redis) against
the LLM stub in a process of its own (50 ms to the first token, 400 tokens a second, 40-word
answers; every reflection learns one new memory, so the critic reviews it and promotion has
work). At each level, in turn, that many users each send a message, read the answer to its
end, wait --think seconds and send the next, for --minutes. Users open their page at a random
moment of the first think time and think 0.5-1.5 × --think, as people do; with --burst they all
send in the same millisecond, every time (a worst case: the turns then arrive in waves).
Reported per level: turns, turns a second, errors (a failed reply, a socket error or a turn
over 30 s), Thalamus's added time to first token and own cost per turn (as bench.turn_overhead
measures them), the CPU time each process spent per turn, and the load average.

Background work (reflection, critic, episode checks, promotion): the Celery queues' depth
(Redis list lengths, plus the tasks the workers hold unacknowledged) and the replies not yet
reflected on, sampled every second during each level and after it, until all is drained; then
the time from the load's end to drained, and the last level's samples over time. Promotion
(a beat sweep every 5 minutes) is queued once the reflections are done and counted in the
drain. Between levels the next starts only once the background work of the last is done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
import websockets

from bench._harness import cpu_reference_ms, free_port, start_up, stop_up, summary, wait_for_page
from bench.turn_overhead import STUB_TPS, STUB_TTFT, _setup_users
from llm_stub import StubServer

REPLY_TOKENS = 40
# The stub's script queue is kept short (topped up as it is used): every request scans it.
SCRIPT_LOW, SCRIPT_HIGH = 150, 300
DRAIN_TIMEOUT = 600


def _reflection() -> dict:
    """A reflection that quotes what every turn of the load says about its user (each turn
    names its own number, so its memory is new)."""
    return {"schema": "StatedQuotes", "json": {"message_1": ["I keep a club card"]}}


def _serve_stub(control) -> None:
    reply = " ".join(["word"] * REPLY_TOKENS)
    answer = {"content": reply, "ttft": STUB_TTFT, "tps": STUB_TPS, "match": "You are Thalamus"}
    with StubServer(port=0) as stub:
        stub.set_defaults(ttft=STUB_TTFT, tps=STUB_TPS)
        stopped = threading.Event()

        def top_up() -> None:
            while not stopped.wait(0.2):
                pending = stub.pending
                answers = sum(1 for r in pending if r.get("match"))
                reflections = len(pending) - answers
                stub.script(
                    *[answer] * max(0, SCRIPT_HIGH - answers if answers < SCRIPT_LOW else 0)
                )
                if reflections < SCRIPT_LOW:
                    stub.script(*[_reflection() for _ in range(SCRIPT_HIGH - reflections)])

        stub.script(*[answer] * SCRIPT_HIGH)
        threading.Thread(target=top_up, daemon=True).start()
        control.send((stub.url, os.getpid()))
        control.recv()  # until told to stop
        stopped.set()


async def _user(
    port: int,
    session_key: str,
    conversation_id: int,
    until: float,
    think: float,
    rng: random.Random | None = None,
):
    """One user's turns until `until`. With `rng` (not a burst) the user opens the page at a
    random moment of the first think time and thinks between half and one and a half times
    `think`, so that users do not all press send in the same millisecond."""
    timings, errors = [], []
    if rng is not None:
        await asyncio.sleep(rng.uniform(0, think))
    uri = f"ws://127.0.0.1:{port}/ws/c/{conversation_id}/"
    headers = {"Cookie": f"sessionid={session_key}", "Origin": f"http://127.0.0.1:{port}"}
    turn = 0
    while time.monotonic() < until:
        try:
            async with websockets.connect(uri, additional_headers=headers, max_size=None) as ws:
                while time.monotonic() < until:
                    sent = time.perf_counter()
                    text = f"turn {turn} hello. I keep a club card numbered {turn}."
                    await ws.send(json.dumps({"action": "send", "content": text}))
                    turn += 1
                    first = None
                    frames = 0
                    while True:
                        frame = await asyncio.wait_for(ws.recv(), 30)
                        frames += 1
                        if first is None and 'class="md-src"' in frame and "word" in frame:
                            first = time.perf_counter()
                        if "msg-assistant complete" in frame:
                            timings.append(
                                (sent, first or time.perf_counter(), time.perf_counter(), frames)
                            )
                            break
                        refused = 'class="chat-notice error"' in frame and (
                            'role="alert"></div>' not in frame
                        )
                        if "msg-assistant failed" in frame or refused:
                            errors.append(frame[:200])
                            break
                    await asyncio.sleep(think * rng.uniform(0.5, 1.5) if rng else think)
        except (OSError, TimeoutError, websockets.WebSocketException) as exc:
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
    return timings, errors


# ----------------------------------------------------------------------- processes and CPU


def _kind(proc: psutil.Process) -> str:
    line = " ".join(proc.cmdline())
    if "uvicorn" in line or "multiprocessing.spawn" in line and _kind(proc.parent()) == "web":
        return "web"  # uvicorn, or one of its --workers
    if " beat" in line:
        return "beat"
    if "worker" in line and ".llm" in line:
        return "llm worker"
    if "worker" in line:
        return "worker"
    if "manage.py up" in line:
        return "up"
    if "postgres" in proc.name() or "postgres" in line:
        return "postgres"
    if "redis" in proc.name():
        return "redis"
    return proc.name()


class Processes:
    """Every process of the run, by kind: up's children, PostgreSQL's, Redis, the stub, us."""

    def __init__(self, up: psutil.Process, data_dir: Path, stub_pid: int) -> None:
        self.up, self.data_dir, self.stub = up, data_dir, psutil.Process(stub_pid)

    def rows(self) -> list[tuple[str, psutil.Process]]:
        # Looked up afresh each time: PostgreSQL starts a process per connection.
        found = [self.up, *self.up.children(recursive=True)]
        for pidfile in ("postgres/postmaster.pid", "redis/redis.pid"):
            try:
                root = psutil.Process(int((self.data_dir / pidfile).read_text().split()[0]))
                found += [root, *root.children(recursive=True)]
            except (OSError, ValueError, psutil.Error):
                continue
        rows = [("stub", self.stub), ("load client", psutil.Process())]
        for proc in found:
            try:
                rows.append((_kind(proc), proc))
            except psutil.Error:
                continue  # a connection that just ended
        return rows

    def cpu_seconds(self) -> dict[str, float]:
        spent: dict[str, float] = {}
        for kind, proc in self.rows():
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            used = times.user + times.system
            if kind == "postgres":
                # The connections that ended: the postmaster reaped them.
                used += times.children_user + times.children_system
            spent[kind] = spent.get(kind, 0.0) + used
        return spent


def _memory(processes: Processes) -> dict[str, float]:
    """Resident MiB by kind (the largest process of each)."""
    largest: dict[str, float] = {}
    for kind, proc in processes.rows():
        try:
            rss = proc.memory_info().rss / 2**20
        except psutil.Error:
            continue
        largest[kind] = max(largest.get(kind, 0.0), rss)
    return largest


# ------------------------------------------------------------------------ background queues


class Backlog:
    """Samples, every second on a thread of its own, the Celery queues and the unreflected."""

    def __init__(self) -> None:
        import redis
        from django.conf import settings

        self.redis = redis.Redis.from_url(
            settings.REDIS_URL
        )  # the broker's, in redis-py's spelling
        self.queues = [settings.CELERY_TASK_DEFAULT_QUEUE, settings.THALAMUS_BACKGROUND_QUEUE]
        self.samples: list[tuple[float, dict]] = []
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def now(self) -> dict:
        from django.db import connection

        from apps.chat.models import Message

        depth = {queue: self._length(queue) for queue in self.queues}
        depth["held"] = self.redis.hlen("unacked")
        depth["unreflected"] = (
            Message.objects.filter(role="assistant", status="complete")
            .exclude(trace__has_key="reflection")
            .count()
        )
        connection.close()
        return depth

    def _length(self, queue: str) -> int:
        # Celery's Redis transport keeps a list per queue and priority.
        names = [queue, *(f"{queue}\x06\x16{p}" for p in range(1, 10))]
        return sum(self.redis.llen(name) for name in names)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.samples.append((time.monotonic() - self.started, self.now()))

    def drained(self, sample: dict) -> bool:
        return not any(sample.values())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _promote() -> None:
    from thalamus_site.celery import app

    app.send_task("memory.promote_and_link")


def _wait_drained(backlog: Backlog, load_end: float, promote: bool) -> float | None:
    """Seconds from the load's end until every queue is empty and every reply reflected on;
    promotion is queued once the reflections are done. None if not within DRAIN_TIMEOUT."""
    promoted = not promote
    while time.monotonic() - load_end < DRAIN_TIMEOUT:
        sample = backlog.now()
        if backlog.drained(sample):
            if promoted:
                return time.monotonic() - load_end
            _promote()
            promoted = True
            time.sleep(0.3)
            continue
        time.sleep(0.25)
    return None


# ----------------------------------------------------------------------------------- levels


async def _level(
    port: int, users: list, minutes: float, think: float, burst: bool = False
) -> tuple[list, list]:
    until = time.monotonic() + minutes * 60
    rng = None if burst else random.Random(len(users))
    results = await asyncio.gather(*(_user(port, *user, until, think, rng) for user in users))
    timings = [t for user_timings, _ in results for t in user_timings]
    errors = [e for _, user_errors in results for e in user_errors]
    return timings, errors


def _server_side(since) -> str:
    """The server's own view of the level's replies: its time to first token (from the message's
    arrival), and for the slowest twentieth, where each step of the turn had ended by then."""
    import statistics

    from apps.chat.models import Message

    rows = list(
        Message.objects.filter(role="assistant", created_at__gte=since)
        .exclude(ttft_ms=None)
        .values_list("ttft_ms", "trace")
    )
    if not rows:
        return "no replies with a first token"
    rows.sort(key=lambda row: row[0])
    ttfts = [ttft for ttft, _ in rows]
    slowest = rows[-max(1, len(rows) // 20) :]
    ends: dict[str, list[float]] = {}
    recall: dict[str, list[float]] = {}
    for _, trace in slowest:
        for span in trace.get("spans", []):
            ends.setdefault(span["name"], []).append(span["start_ms"] + span["ms"])
        for part, ms in trace.get("memory", {}).get("timings_ms", {}).items():
            recall.setdefault(part, []).append(ms)
    steps = ", ".join(f"{name} {statistics.median(v):.0f}" for name, v in ends.items())
    parts = ", ".join(f"{name} {statistics.median(v):.0f}" for name, v in recall.items())
    return (
        f"server TTFT {summary(ttfts)}; the slowest {len(slowest)}: TTFT from "
        f"{slowest[0][0]:.0f} ms, step ends (median ms): {steps}; their recall's parts (median "
        f"ms): {parts}"
    )


def _background_settings(wait_seconds: int) -> None:
    """How long a background call waits while an answer streams from the same endpoint: the
    stub, like vLLM, answers any number of requests at once, so no call need wait for another."""
    from apps.core.models import RuntimeConfig
    from apps.core.selectors import forget_runtime_config

    config = RuntimeConfig.objects.order_by("pk").first()
    config.background_wait_seconds = wait_seconds
    config.save()
    forget_runtime_config()


def _run(args, port: int, users: list, processes: Processes) -> None:
    levels = [int(level) for level in args.levels.split(",")]
    _background_settings(args.background_wait)
    # Warm-up: one turn each, then its background work done.
    backlog = Backlog()
    asyncio.run(_level(port, users, 0.002, 0))
    _wait_drained(backlog, time.monotonic(), promote=False)
    print(f"CPU reference (cpu_reference_ms): {cpu_reference_ms():.0f} ms", flush=True)
    streaming = (REPLY_TOKENS - 1) / STUB_TPS
    table, history = [], []
    for level in levels:
        load_before = os.getloadavg()[0]
        cpu_before = processes.cpu_seconds()
        started = time.monotonic()
        since = datetime.now(UTC)
        timings, errors = asyncio.run(
            _level(port, users[:level], args.minutes, args.think, burst=args.burst)
        )
        load_end = time.monotonic()
        cpu_load = processes.cpu_seconds()
        load_after = os.getloadavg()[0]
        at_end = backlog.now()
        drain = _wait_drained(backlog, load_end, promote=True)
        cpu_after = processes.cpu_seconds()
        history = [
            (at - (started - backlog.started), sample)
            for at, sample in backlog.samples
            if at >= started - backlog.started
        ]
        added = [(first - sent - STUB_TTFT) * 1000 for sent, first, _, _ in timings]
        own = [(done - sent - STUB_TTFT - streaming) * 1000 for sent, _, done, _ in timings]
        frames = sorted(frames for *_, frames in timings) or [0]
        seconds = load_end - started
        turns = len(timings)
        pace = "in step (--burst)" if args.burst else "0.5-1.5 × think, random start"
        print(
            f"\n{level} users for {args.minutes:g} min, think {args.think:g} s ({pace})",
            flush=True,
        )
        print(f"  load average {load_before:.2f} at the start, {load_after:.2f} at the end")
        print(f"  turns {turns} ({turns / seconds:.1f}/s), errors {len(errors)}")
        for error in errors[:5]:
            print(f"    error: {error}")
        if timings:
            print(f"  added time to first token: {summary(added)}")
            print(f"  own cost per turn:         {summary(own)}")
            print(f"  frames a page gets per turn, median: {frames[len(frames) // 2]}")
            print(f"  {_server_side(since)}")
        print("  CPU per turn (ms), during the load / and its background work after it:")
        for kind in sorted(cpu_after, key=lambda k: -(cpu_after[k] - cpu_before.get(k, 0))):
            during = (cpu_load.get(kind, 0) - cpu_before.get(kind, 0)) * 1000 / max(1, turns)
            total = (cpu_after[kind] - cpu_before.get(kind, 0)) * 1000 / max(1, turns)
            print(f"    {kind:>12}: {during:6.1f} / {total:6.1f}")
        print(f"  backlog at the load's end: {at_end}")
        drained = f"{drain:.1f} s" if drain is not None else f"not within {DRAIN_TIMEOUT} s"
        print(f"  drained (queues empty, every reply reflected on, promotion run): {drained}")
        ordered_added, ordered_own = sorted(added) or [0], sorted(own) or [0]
        table.append(
            (
                level,
                turns,
                turns / seconds,
                len(errors),
                ordered_added[len(ordered_added) // 2],
                ordered_added[min(len(ordered_added) - 1, round(0.95 * (len(ordered_added) - 1)))],
                ordered_own[len(ordered_own) // 2],
                max(s["unreflected"] for _, s in history) if history else 0,
                drain,
                load_after,
            )
        )
    backlog.stop()
    print(f"\nresident memory (MiB, largest process of each kind): {_rounded(_memory(processes))}")
    print(
        f"\n{args.minutes:g} min per level, think {args.think:g} s, background_wait_seconds "
        f"{args.background_wait}, background concurrency {args.background_concurrency}:"
    )
    print(
        "| users | turns | turns/s | errors | added TTFT, median | p95 | own cost, median "
        "| most unreflected | drained after the load | load average |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for level, turns, rate, errors, median, p95, own, most, drain, load in table:
        drained = f"{drain:.0f} s" if drain is not None else "no"
        print(
            f"| {level} | {turns:,} | {rate:.1f} | {errors} | {median:.0f} ms | {p95:.0f} ms "
            f"| {own:.0f} ms | {most} | {drained} | {load:.2f} |"
        )
    print(f"\nqueue depth over time, the last level ({levels[-1]} users; t from its start):")
    print("| t (s) | " + " | ".join(history[0][1]) + " |" if history else "")
    for at, sample in history[:: max(1, len(history) // 30)]:
        print(f"| {at:.0f} | " + " | ".join(str(v) for v in sample.values()) + " |")


def _rounded(values: dict[str, float]) -> dict[str, int]:
    return {kind: round(value) for kind, value in values.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,10,20,50", help="users at each level, in order")
    parser.add_argument("--minutes", type=float, default=1.0, help="of load at each level")
    parser.add_argument("--think", type=float, default=0.5)
    parser.add_argument(
        "--burst",
        action="store_true",
        help="every user sends at the same moment and thinks exactly --think (a worst case)",
    )
    parser.add_argument(
        "--background-wait",
        type=int,
        default=0,
        help="background_wait_seconds (0: background calls never wait for the chat, as the stub "
        "serves every request at once; the shipped 120 s suits a one-slot local server)",
    )
    parser.add_argument(
        "--background-concurrency",
        type=int,
        default=2,
        help="background LLM calls at once: the llm worker's processes (THALAMUS_BACKGROUND_"
        "CONCURRENCY; the shipped 1 suits a one-slot local server)",
    )
    parser.add_argument(
        "--web-processes", type=int, help="`up --web-processes` (default: up's own default)"
    )
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    control, stub_end = context.Pipe()
    stub = context.Process(target=_serve_stub, args=(stub_end,), daemon=True)
    stub.start()
    stub_url, stub_pid = control.recv()
    with tempfile.TemporaryDirectory(prefix="thalamus-load-") as tmp:
        data_dir = Path(tmp) / "data"
        port = free_port()
        process = start_up(
            data_dir,
            port,
            Path(tmp) / "up.log",
            *(["--web-processes", str(args.web_processes)] if args.web_processes else []),
            THALAMUS_LLM_BASE_URL=stub_url,
            THALAMUS_BACKGROUND_CONCURRENCY=str(args.background_concurrency),
        )
        try:
            wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", process)
            most = max(int(level) for level in args.levels.split(","))
            users = _setup_users(data_dir, most)
            processes = Processes(psutil.Process(process.pid), data_dir, stub_pid)
            _run(args, port, users, processes)
        finally:
            stop_up(process)
            control.send("stop")
            stub.join(10)


if __name__ == "__main__":
    main()
