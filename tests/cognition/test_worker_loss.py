from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from apps.cognition import tasks
from apps.core.models import Event
from apps.memory.models import MemoryNode
from tests.cognition.conftest import reflection, wait_for

ROOT = Path(__file__).resolve().parents[2]


def _pool_child(pid: int) -> int | None:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return int(children[0]) if children else None


def test_a_worker_child_killed_mid_reflection_is_redelivered_and_writes_exactly_once(
    transactional_db, user, turn, llm_stub, config
):
    config(critic_enabled=False)
    reply = turn("I collect old stamps", "What a hobby!")
    learnt = reflection("I collect old stamps")
    # The first attempt hangs inside the LLM call until it is killed; the redelivery succeeds.
    llm_stub.script({**learnt, "ttft": 30}, learnt)
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}&port={db['PORT']}"
        ),
        "REDIS_URL": settings.REDIS_URL,
    }
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "thalamus_site",
            "worker",
            "--pool=prefork",
            "--concurrency=1",
            # Reflection runs on the background LLM queue.
            f"--queues={settings.CELERY_TASK_DEFAULT_QUEUE},{settings.THALAMUS_BACKGROUND_QUEUE}",
            "--without-gossip",
            "--without-mingle",
            "--loglevel=warning",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        tasks.reflect.delay(reply.pk)
        wait_for(
            lambda: any("word for word" in str(r["body"]) for r in llm_stub.requests),
            timeout=30,
        )
        child = _pool_child(worker.pid)
        os.kill(child, signal.SIGKILL)

        node = wait_for(lambda: MemoryNode.objects.filter(owner=user).first(), timeout=30)
        time.sleep(0.5)  # a duplicate would show up now
        assert MemoryNode.objects.filter(owner=user).count() == 1
        assert node.description == "The user collects old stamps"
        assert Event.objects.filter(owner=user, kind="perception").count() == 1
        assert _pool_child(worker.pid) != child
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(15)


TASKS = 200


def _words(i: int) -> str:
    # Words of their own, so no two memories look alike to the duplicate check.
    return f"Tok{i}alpha tok{i}beta tok{i}gamma tok{i}delta"


def _learnt(i: int) -> dict:
    return {**reflection(f"I keep {_words(i)}"), "match": f"<m{i}>", "ttft": 0.02}


def test_killed_children_then_a_killed_worker_group_lose_no_reflection_and_write_none_twice(
    transactional_db, user, llm_stub, config
):
    from redis import Redis

    from apps.chat.models import Conversation, Message
    from tests.private_servers import pool_children, private_redis, redis_url, start_worker
    from thalamus_site.celery import app
    from thalamus_site.settings import celery_url

    config(critic_enabled=False)
    replies = []
    for i in range(TASKS):
        conversation = Conversation.objects.create(owner=user)
        asked = Message.objects.create(
            conversation=conversation,
            role="user",
            content=f"Remember the code <m{i}>. I keep {_words(i)}.",
        )
        replies.append(
            Message.objects.create(
                conversation=conversation, role="assistant", content="Noted.", reply_to=asked
            )
        )
    # Each reply twice: a killed attempt may have used up the first. Reply 40 hangs the first
    # time, so a child is surely inside the LLM call when it is killed.
    llm_stub.script(
        *({**_learnt(i), "ttft": 30} if i == 40 else _learnt(i) for i in range(TASKS)),
        *(_learnt(i) for i in range(TASKS)),
    )

    def reflected() -> int:
        return Message.objects.filter(
            pk__in=[r.pk for r in replies], trace__has_key="reflection"
        ).count()

    # A broker of this test's own: the recovery below hands back every unacked task in it.
    with private_redis() as redis:
        url = redis_url(redis)
        worker = start_worker(redis=url, concurrency=2)
        recovery = None
        try:
            with app.connection_for_write(celery_url(url)) as connection:
                for reply in replies:
                    tasks.reflect.apply_async((reply.pk,), connection=connection)
            wait_for(lambda: any("<m40>" in str(r["body"]) for r in llm_stub.requests), 60)
            for child in pool_children(worker.pid):
                os.kill(child, signal.SIGKILL)
            wait_for(lambda: reflected() >= TASKS // 2, 120)
            # The whole worker, its parent and its children at once, as an OOM kill or a
            # power cut would: its unacked tasks wait in the broker for the next worker.
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
            in_flight = Redis.from_url(url).hlen("unacked")
            left = TASKS - reflected()
            recovery = start_worker(redis=url, concurrency=2, visibility_timeout=5)
            wait_for(lambda: reflected() == TASKS, 180)
            time.sleep(1)  # a duplicate would show up now
        finally:
            for process in (worker, recovery):
                if process is not None and process.poll() is None:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(15)

    nodes = MemoryNode.objects.filter(owner=user)
    descriptions = list(nodes.values_list("description", flat=True))
    assert in_flight > 0 and left > 0
    assert len(descriptions) == TASKS
    assert set(descriptions) == {f"The user keeps {_words(i)}" for i in range(TASKS)}
    assert Event.objects.filter(owner=user, kind="perception").count() == TASKS


def test_a_reflection_works_through_every_llm_fault_in_turn_and_writes_once(
    celery_worker, user, turn, llm_stub, config
):
    """No fault holds the worker: each attempt ends within its timeout, the next one retries."""
    config(critic_enabled=False, background_timeout_seconds=5)
    reply = turn("I collect old stamps", "What a hobby!")
    learnt = reflection("I collect old stamps")
    faults = [
        {"fault": "hang", "ttft": 30},
        {"fault": "http_429", "retry_after": 120},
        {"fault": "http_500", "retry_after": 120},
        {"fault": "drop"},
    ]
    llm_stub.script(*({**fault, "match": learnt["match"]} for fault in faults), learnt)

    started = time.monotonic()
    tasks.reflect.delay(reply.pk)
    node = wait_for(lambda: MemoryNode.objects.filter(owner=user).first(), timeout=60)

    # The hang ends at its timeout (5 s), the others at once; the backoff between the five
    # attempts adds 0-15 s; each attempt may take 5 s more than its wait.
    assert time.monotonic() - started < 5 + 15 + 5 * 5
    asked = [r for r in llm_stub.requests if "word for word" in str(r["body"])]
    assert len(asked) == 5
    assert node.description == "The user collects old stamps"
    assert MemoryNode.objects.filter(owner=user).count() == 1
