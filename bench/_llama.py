"""A real llama.cpp server with SmolLM2-135M-Instruct, as `make real-llm` builds it into a cache
outside the checkout (scripts/real_llm.sh). Started by the real-server tests and benchmarks."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from apps.core.ports import free_port

CACHE = Path(
    os.environ.get("THALAMUS_REAL_LLM_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "thalamus/real-llm"
)
SERVER = CACHE / "llama-server-11434.0.0"
MODEL = CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2"


class NotBuilt(RuntimeError):
    pass


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


def start(
    context: int, *, slots: int | None = None, threads: int = 2
) -> tuple[subprocess.Popen, RealServer]:
    """`llama-server --jinja -c <context>` on a free port, once its model is loaded; with
    `slots`, `-np <slots>` (else the server's own number, four); `--threads <threads>`."""
    if not (SERVER.exists() and MODEL.exists()):
        raise NotBuilt(f"no real LLM server at {SERVER}: run `make real-llm` (make test does)")
    port = free_port()
    process = subprocess.Popen(
        [
            str(SERVER),
            *("--model", str(MODEL), "--alias", MODEL_NAME, "--jinja", "-c", str(context)),
            *("--host", "127.0.0.1", "--port", str(port), "--metrics", "--threads", str(threads)),
            *(("-np", str(slots)) if slots else ()),
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


def stop(process: subprocess.Popen) -> None:
    process.kill()
    process.wait()


def _wait_until_loaded(root: str, process: subprocess.Popen, timeout: float = 60) -> None:
    # /health refuses connections while the server starts and answers 503 while the model loads.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama-server exited with {process.returncode}")
        try:
            if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"llama-server at {root} did not load its model within {timeout} s")
