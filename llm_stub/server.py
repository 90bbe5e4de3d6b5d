"""OpenAI-compatible LLM stub server used by tests, benchmarks and the demo mode.

Standard library only and free of Django imports, so it can run in-process
(``StubServer(port=0).start()``) or as its own process::

    python -m llm_stub --port 8089 [--host 127.0.0.1] [--dim 768] [--demo]

Replies can be scripted (content, JSON, latency, faults) through the Python API or,
from other processes, through the ``/_stub/*`` HTTP control endpoints.

Server settings (``set_defaults(...)`` or ``POST /_stub/defaults``; ``reset()`` restores them)
reproduce what real local servers (llama.cpp's llama-server, Ollama, vLLM) do. Every default
leaves the stub a plain, well-behaved server. Tokens are whitespace words
(``tokens.count_tokens``) everywhere: usage, contexts and limits.

- ``context`` (None): the context window (n_ctx). A prompt of at least that many tokens
  (all message contents joined) overflows; ``overflow`` decides what happens:
  ``"reject"`` (llama.cpp) answers HTTP 400 ``exceed_context_size_error``; ``"truncate"``
  (Ollama) silently keeps the first ``TRUNCATE_KEEP`` words and the newest ones,
  ``context - 1`` in all, and answers normally with the smaller ``prompt_tokens``. Scripted
  ``match`` still sees the whole prompt; the default reply quotes only what survived.
- ``honours_num_ctx`` (False): take the context from the request's ``options.num_ctx`` or
  ``num_ctx`` (Ollama's native option), which Ollama's ``/v1`` ignores.
- ``modelfile_num_ctx`` (True): an Ollama server's ``/api/show`` says ``num_ctx <context>`` in
  the model's parameters, as for a model created with ``PARAMETER num_ctx``; when False it does
  not, and the window is the server's default (OLLAMA_CONTEXT_LENGTH), which only ``/api/ps``
  tells, for a loaded model.
- ``max_tokens`` / ``max_completion_tokens`` of a request always cut the reply
  (finish_reason ``"length"``).
- ``eos`` (True): when False the model never stops by itself: after the reply comes
  non-repeating English-like filler until max_tokens, else until the context is full, else
  ``RUNAWAY_TOKENS``; finish_reason ``"length"``.
- ``loop`` (False): the reply is followed by ``LOOP_LINE`` over and over, up to the same limit.
- ``special_tokens`` (False): chat-template tokens leak into the reply
  (``<|im_start|>assistant`` before it, ``<|im_end|>`` and the next ``user`` turn after it).
- ``json_junk`` (None): default replies to ``response_format`` requests are ``"empty"``
  (``{}``), ``"meaningless"`` (schema-valid, junk strings) or ``"prose"`` (the JSON in a
  fenced block inside chatter).
- ``response_formats`` (json_schema, json_object): the response_format types accepted;
  others get HTTP 400. ``text`` is always accepted.
- ``slots`` (None): how many chat generations run at once; the others wait in arrival order.
  A client that goes away frees its slot. ``max_concurrent`` and ``GET /_stub/stats`` report
  the most generations ever run at once.
- ``server`` (``"plain"``): ``"llamacpp"`` adds ``GET /props``, ``"ollama"`` adds
  ``POST /api/show`` and ``GET /api/ps`` (the models asked to chat since the last reset, with
  ``context_length``: the context, else 4096) and truncates an overflowing prompt whatever
  ``overflow`` says, as Ollama does; ``"vllm"`` adds ``max_model_len`` to ``/v1/models``.
- ``missing_models`` ([]): models the server does not have, as Ollama without them pulled:
  ``/v1/models`` leaves them out and a request naming one gets HTTP 404
  ``model "x" not found, try pulling it first``.
- ``tools`` (True): when False the server has no tool calling, like llama-server started
  without ``--jinja``: a request carrying ``tools`` gets HTTP 500
  ``tools param requires --jinja flag``. When True, an unscripted request with ``tools``
  answers with plain content (the model chose no tool).
- ``reasoning_format`` (``"deepseek"``): where a scripted ``reasoning`` goes. ``"deepseek"``
  (llama.cpp's default ``--reasoning-format deepseek``): ``reasoning_content`` in the message,
  or streamed as ``reasoning_content`` deltas before the content deltas; ``"ollama"`` (Ollama's
  ``/v1`` for thinking models): the same, named ``reasoning``; ``"none"`` (llama.cpp
  ``--reasoning-format none``, a raw model): inline, the content is
  ``"<think>\\n{reasoning}\\n</think>\\n\\n{content}"``.

A scripted ``tool_calls`` reply (``[{"name": ..., "arguments": {...} or a raw string}]``, a raw
string to script arguments that are not JSON) answers with an assistant message calling those
tools (ids, type ``function``, arguments as a JSON string) and finish_reason ``"tool_calls"``,
streamed as OpenAI streams them or whole.

A scripted ``reasoning`` (a string) is a reasoning model's thinking before its reply, sent as
``reasoning_format`` says (without ``content`` or ``json``, the default reply follows it). Its
tokens count in ``completion_tokens``, stream paced by ``tps`` like the content's, and are what
``max_tokens`` cuts first: a thinking that uses them all leaves an empty content and
finish_reason ``"length"``.

``tps`` paces every streamed token, filler included; a non-streamed reply arrives whole after
``ttft``, except a runaway one (``eos`` off or ``loop``), which takes its generation time.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from types import FrameType, TracebackType

from llm_stub.handler import StubHTTPServer
from llm_stub.routes import Handler
from llm_stub.state import DEFAULT_MODELS, StubState

logger = logging.getLogger("thalamus.llm_stub")


class StubServer(StubState):
    """In-process OpenAI-compatible stub; ``url`` is the ``base_url`` for OpenAI clients."""

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        dim: int | None = None,
        demo: bool = False,
        models: list[str] | tuple[str, ...] | None = None,
    ) -> None:
        super().__init__(dim=dim, demo=demo, models=models)
        self.host = host
        self._port = port
        self._httpd: StubHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------------

    def start(self) -> StubServer:
        if self._httpd is not None or self._stopping.is_set():
            raise RuntimeError("StubServer can only be started once")
        self._httpd = StubHTTPServer((self.host, self._port), self, Handler)
        self._port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"llm-stub:{self._port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd = self._httpd
        if httpd is None:
            return
        # Wakes handlers sleeping in ttft/tps/hang so shutdown doesn't wait for them.
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()  # and requests waiting for a slot
        httpd.shutdown()
        httpd.server_close()
        httpd.disconnect_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> StubServer:
        return self if self._httpd is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def url(self) -> str:
        return f"{self.root_url}/v1"


# ------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m llm_stub", description="OpenAI-compatible LLM stub server"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089, help="0 picks a free port")
    parser.add_argument(
        "--dim", type=int, default=None, help="embedding size (default $THALAMUS_EMBED_DIM or 768)"
    )
    parser.add_argument("--demo", action="store_true", help="friendly demo replies")
    parser.add_argument(
        "--model",
        action="append",
        dest="models",
        help=f"model id to advertise (repeatable; default: {', '.join(DEFAULT_MODELS)})",
    )
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s llm-stub %(message)s"
    )
    stop_requested: list[int] = []

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.append(signum)

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    stub = StubServer(args.port, args.host, dim=args.dim, demo=args.demo, models=args.models)
    stub.start()
    logger.info(
        "listening on %s (models=%s, dim=%d, demo=%s)",
        stub.url,
        ",".join(stub.models),
        stub.dim,
        stub.demo,
    )
    try:
        # Polling rather than Event.wait: setting an Event from a signal handler can deadlock.
        while not stop_requested:
            time.sleep(0.2)
    finally:
        stub.stop()
        logger.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
