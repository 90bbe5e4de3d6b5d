"""Warm at start: every web process `up` starts loads what a first turn needs, after it serves,
and /healthz says how far it has got; the first turn then loads none of it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress

import httpx
import pytest
from django.conf import settings

from apps.accounts.services import api_key_create
from apps.core.management.commands.up import web_command
from apps.core.ports import free_port
from apps.memory.embedding import WARM_TEXT
from tests.core.test_up import ROOT
from tests.private_servers import database_url
from thalamus_site.asgi import WARM_STEPS

pytestmark = pytest.mark.django_db(transaction=True)
HEALTH_TOKEN = "warm-test-monitor"
# How long the stub holds each warm-up embedding: /healthz must answer meanwhile.
HELD_SECONDS = 6.0


def _health(url: str, process: subprocess.Popen, timeout: float = 60) -> dict:
    """/healthz's report, as soon as the server answers."""
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, "the web server exited"
        try:
            response = httpx.get(
                f"{url}/healthz", headers={"Authorization": f"Bearer {HEALTH_TOKEN}"}, timeout=10
            )
            break
        except httpx.TransportError:
            assert time.monotonic() < deadline, "the web server did not answer"
            time.sleep(0.05)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.timeout(180)
def test_each_web_process_warms_its_embedder_after_it_serves_and_healthz_says_so(llm_stub):
    # The warm-up's embedding is held by the server, as a model being loaded would hold it.
    llm_stub.script(*[{"endpoint": "embeddings", "match": WARM_TEXT, "ttft": HELD_SECONDS}] * 2)
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "THALAMUS_HEALTH_TOKEN": HEALTH_TOKEN,
        "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.Popen(
        web_command("127.0.0.1", port, 2), cwd=ROOT, env=env, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        # Served, and healthy, while the embedder is still being loaded.
        first = _health(url, process)
        assert first["status"] == "ok"
        assert first["warm"]["state"] == "warming" and first["warm"]["ok"] is False

        warm_by_pid: dict[int, dict] = {}
        deadline = time.monotonic() + 60
        while len(warm_by_pid) < 2 and time.monotonic() < deadline:
            warm = _health(url, process)["warm"]
            if warm["state"] != "warming":
                warm_by_pid[warm["pid"]] = warm
            time.sleep(0.1)
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)

    assert len(warm_by_pid) == 2, warm_by_pid
    for warm in warm_by_pid.values():
        assert warm["ok"] is True and warm["state"] == "warm", warm
        assert set(warm["seconds"]) == {name for name, _ in WARM_STEPS}
        assert warm["seconds"]["embedder"] >= HELD_SECONDS * 0.9
    warm_ups = [
        request
        for request in llm_stub.requests
        if request["path"].endswith("/embeddings") and request["body"]["input"] == [WARM_TEXT]
    ]
    assert len(warm_ups) == 2


# A fresh process as the web's is once warm: the app imported, the warm-up's steps run, one
# first turn through /v1. It prints what the turn imported.
FIRST_TURN = """
import asyncio, json, os, sys
import httpx
import thalamus_site.asgi as web

for name, load in web.WARM_STEPS:
    load()
before = set(sys.modules)

async def turn():
    transport = httpx.ASGITransport(app=web.application)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return await client.post(
            "/v1/chat/completions",
            headers={"Authorization": "Bearer " + os.environ["PROBE_API_KEY"]},
            json={"model": "thalamus", "messages": [{"role": "user", "content": "I ran home"}]},
            timeout=60,
        )

response = asyncio.run(turn())
print(json.dumps({"status": response.status_code, "imported": sorted(set(sys.modules) - before)}))
"""


def _probe(script: str, **env: str) -> dict:
    """Run `script` in a fresh process on the tests' database and Redis: its last line, read as
    JSON."""
    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": settings.REDIS_URL, **env}
    probe = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    return json.loads(probe.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(120)
def test_a_first_turn_after_the_warm_up_loads_no_embedder_lemmas_or_module_of_ours(user):
    _, secret = api_key_create(user=user, name="first turn")
    result = _probe(FIRST_TURN, PROBE_API_KEY=secret)
    assert result["status"] == 200
    lazily = [
        name
        for name in result["imported"]
        if name.split(".")[0]
        in {"apps", "thalamus_site", "openai", "simplemma", "sentence_transformers", "torch"}
    ]
    assert lazily == []


FROZEN = """
import gc, json
import thalamus_site.asgi  # noqa: F401  (the app, as a web process loads it)
from apps.core import warmup

before = gc.get_freeze_count()
warmup.warm_in_background([]).join()
print(json.dumps({"before": before, "after": gc.get_freeze_count(), "left": len(gc.get_objects())}))
"""


@pytest.mark.timeout(120)
def test_the_warm_up_leaves_the_loaded_app_out_of_the_collectors_full_collections():
    """A full collection walked every object the app had loaded (90-125 ms a time in a web
    process); once warm, they are frozen and it walks only what turns made since."""
    counts = _probe(FROZEN)
    assert counts["before"] == 0
    # Nearly everything alive is frozen: what is left for a full collection is a sliver of it.
    assert counts["after"] > 100_000 and counts["left"] < counts["after"] / 20
