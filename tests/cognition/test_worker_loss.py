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
from tests.cognition.conftest import memory, reflection, wait_for

ROOT = Path(__file__).resolve().parents[2]


def _pool_child(pid: int) -> int | None:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return int(children[0]) if children else None


def test_a_worker_child_killed_mid_reflection_is_redelivered_and_writes_exactly_once(
    transactional_db, user, turn, llm_stub, config
):
    config(critic_enabled=False)
    reply = turn("I collect old stamps", "What a hobby!")
    learnt = reflection(memories=[memory("The user collects old stamps")])
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
            lambda: any("reflective memory" in str(r["body"]) for r in llm_stub.requests),
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
