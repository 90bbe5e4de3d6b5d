"""A real llama.cpp server with a real small model, for the tests of normal behaviour.

`make real-llm` (run by `make test`) builds `llama-server` and unpacks SmolLM2-135M-Instruct into
a cache outside the checkout (scripts/real_llm.sh); these fixtures start it on free ports. A
missing build fails the tier loudly: it is never skipped.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from apps.core.ports import free_port
from tests.private_servers import wait_for_http

CACHE = Path(
    os.environ.get("THALAMUS_REAL_LLM_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "thalamus/real-llm"
)
SERVER = CACHE / "llama-server-11434.0.0"
MODEL = CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2"


@dataclass(frozen=True)
class RealServer:
    url: str  # the OpenAI-compatible base URL, …/v1
    root: str
    context: int

    def metric(self, name: str) -> float:
        """One of llama-server's own counters (its --metrics page)."""
        text = httpx.get(f"{self.root}/metrics", timeout=5).text
        for line in text.splitlines():
            if line.startswith(f"llamacpp:{name} "):
                return float(line.split()[1])
        raise KeyError(name)


def _start(context: int) -> tuple[subprocess.Popen, RealServer]:
    if not (SERVER.exists() and MODEL.exists()):
        pytest.fail(f"no real LLM server at {SERVER}: run `make real-llm` (make test does)")
    port = free_port()
    process = subprocess.Popen(
        [
            str(SERVER),
            "--model",
            str(MODEL),
            "--alias",
            MODEL_NAME,
            "--jinja",
            "-c",
            str(context),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--metrics",
            "--threads",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    root = f"http://127.0.0.1:{port}"
    try:
        _wait_until_loaded(root, process)
    except BaseException:
        process.kill()
        raise
    return process, RealServer(f"{root}/v1", root, context)


def _wait_until_loaded(root: str, process: subprocess.Popen, timeout: float = 60) -> None:
    # /health answers 503 while the model loads, 200 once it serves.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        wait_for_http(f"{root}/health", timeout=deadline - time.monotonic(), process=process)
        if httpx.get(f"{root}/health", timeout=2).status_code == 200:
            return
        time.sleep(0.2)
    raise TimeoutError(f"llama-server at {root} did not load its model within {timeout} s")


@pytest.fixture(scope="session")
def real_llm() -> Iterator[RealServer]:
    """llama-server --jinja -c 4096 with SmolLM2-135M-Instruct."""
    process, server = _start(4096)
    yield server
    process.kill()
    process.wait()


@pytest.fixture(scope="session")
def small_real_llm() -> Iterator[RealServer]:
    """The same model behind a smaller window (-c 1024): a fallback that must be fitted anew."""
    process, server = _start(1024)
    yield server
    process.kill()
    process.wait()


@pytest.fixture
def on_real_llm(config, real_llm):
    """The runtime configuration pointed at the real server for every role but the embeddings
    (a chat model serves none; the stub's stay)."""
    from tests._environment import STUB

    def point(**values):
        return config(
            **{
                "llm_base_url": real_llm.url,
                "chat_model": MODEL_NAME,
                "embed_base_url": STUB.url,
                "turns_per_minute": 0,
                **values,
            }
        )

    return point
