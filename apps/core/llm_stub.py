"""OpenAI-compatible LLM stub server used by tests, benchmarks and the demo mode.

Standard library only and free of Django imports, so it can run in-process
(``StubServer(port=0).start()``) or as its own process::

    python -m apps.core.llm_stub --port 8089 [--host 127.0.0.1] [--dim 768] [--demo]

Replies can be scripted (content, JSON, latency, faults) through the Python API or,
from other processes, through the ``/_stub/*`` HTTP control endpoints.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import hashlib
import json
import logging
import math
import os
import re
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any
from urllib.parse import urlsplit

logger = logging.getLogger("thalamus.llm_stub")

DEFAULT_MODELS: tuple[str, ...] = ("qwen2.5:7b", "nomic-embed-text", "demo")
DEFAULT_CHAT_MODEL = "qwen2.5:7b"
DEFAULT_EMBED_MODEL = "nomic-embed-text"
DEFAULT_DIM = 768
HANG_SECONDS = 30.0
FAULTS = frozenset({"http_500", "http_429", "drop", "garbage", "hang"})
ENDPOINTS = frozenset({"chat", "embeddings"})
REPLY_KEYS = frozenset(
    {"content", "json", "match", "ttft", "tps", "fault", "endpoint", "finish_reason"}
)
DEFAULT_KEYS = frozenset({"ttft", "tps", "fault"})

_TOKEN_RE = re.compile(r"\S+\s*|\s+")
_WORD_RE = re.compile(r"\w+")
_GARBAGE_BODY = b'{"choices": ['


# --------------------------------------------------------------------------- helpers


def count_tokens(text: str) -> int:
    """Token count used for ``usage``: whitespace-separated words, at least 1."""
    return max(1, len(text.split()))


def split_tokens(text: str) -> list[str]:
    """Split text into streaming pieces, keeping whitespace so they concatenate back."""
    return _TOKEN_RE.findall(text)


def default_dim() -> int:
    raw = os.environ.get("THALAMUS_EMBED_DIM", "").strip()
    return int(raw) if raw else DEFAULT_DIM


def embed_text(text: str, dim: int) -> list[float]:
    """Deterministic unit vector for ``text`` via signed feature hashing of its words.

    hashlib (not ``hash()``) keeps vectors identical across processes and PYTHONHASHSEED.
    """
    if dim < 1:
        raise ValueError("dim must be >= 1")
    vec = [0.0] * dim
    for word in _WORD_RE.findall(text.lower()):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        bucket = int.from_bytes(digest[:6], "big") % dim
        vec[bucket] += 1.0 if digest[7] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        # Empty (or fully cancelled) text still needs a valid, fixed, non-zero vector.
        return [1.0 / math.sqrt(dim)] * dim
    return [v / norm for v in vec]


_FORMAT_SAMPLES: dict[str, str] = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00",
    "duration": "P0D",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "email": "user@example.com",
    "uri": "http://example.com",
    "url": "http://example.com",
    "hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
}


def schema_instance(schema: Any, root: Any = None) -> Any:
    """Build a minimal instance that validates against a JSON schema.

    Objects get only their required properties, arrays are empty (or ``minItems`` long),
    strings ``""``, numbers 0, booleans false, enums their first value; ``$ref``
    (local pointers such as ``#/$defs/X``), ``anyOf``/``oneOf`` (first option) and
    ``allOf`` (merged) are followed.
    """
    return _instance(schema, schema if root is None else root, 0)


def _resolve_ref(ref: str, root: Any) -> Any:
    if not ref.startswith("#"):
        raise ValueError(f"unsupported $ref: {ref!r}")
    node = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _merge_all_of(schema: dict[str, Any], root: Any) -> dict[str, Any]:
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        while isinstance(part, dict) and "$ref" in part:
            part = _resolve_ref(part["$ref"], root)
        if not isinstance(part, dict):
            continue
        for key, value in part.items():
            if key == "properties":
                merged["properties"] = {**value, **merged.get("properties", {})}
            elif key == "required":
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    return merged


def _number(schema: dict[str, Any], kind: str) -> int | float:
    value: float = 0
    raised = False
    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    xmin, xmax = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if _is_number(minimum) and value < minimum:
        value, raised = minimum, True
    if _is_number(xmin) and value <= xmin:
        value, raised = xmin + 1, True
    if _is_number(maximum) and value > maximum:
        value = maximum
    if _is_number(xmax) and value >= xmax:
        value = xmax - 1
    if kind == "integer":
        return math.ceil(value) if raised else math.floor(value)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _instance(schema: Any, root: Any, depth: int) -> Any:
    if depth > 64 or not isinstance(schema, dict):
        return None
    if "$ref" in schema:
        return _instance(_resolve_ref(schema["$ref"], root), root, depth + 1)
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if schema.get("enum"):
        return copy.deepcopy(schema["enum"][0])
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _instance(schema[key][0], root, depth + 1)
    if schema.get("allOf"):
        return _instance(_merge_all_of(schema, root), root, depth + 1)

    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind is None:
        if "properties" in schema or "required" in schema:
            kind = "object"
        elif "items" in schema or "prefixItems" in schema:
            kind = "array"

    if kind == "object":
        props = schema.get("properties") or {}
        return {
            name: _instance(props.get(name, {}), root, depth + 1)
            for name in schema.get("required") or []
        }
    if kind == "array":
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        return [
            _instance(prefix[i] if i < len(prefix) else items, root, depth + 1)
            for i in range(int(schema.get("minItems", 0)))
        ]
    if kind == "string":
        sample = _FORMAT_SAMPLES.get(schema.get("format", ""), "")
        return sample + "x" * max(0, int(schema.get("minLength", 0)) - len(sample))
    if kind in ("integer", "number"):
        return _number(schema, kind)
    if kind == "boolean":
        return False
    return None


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return ""


def _messages_text(messages: list[Any]) -> str:
    return "\n".join(_content_text(m.get("content")) for m in messages if isinstance(m, dict))


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


def _gist(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip() + "…"


def demo_reply(user_text: str) -> str:
    """The friendly canned answer of the demo model, with a Markdown rendering sample."""
    gist = _gist(user_text)
    said = (
        f"You asked: “{gist}”. I can't really think about it, but a real model would."
        if gist
        else "You haven't asked anything yet, so go ahead and type a question!"
    )
    return (
        "Hi! I'm the **demo model** built into Thalamus: a stand-in that works without "
        "a real LLM, so my answers are canned.\n\n"
        f"{said}\n\n"
        "Here is a little Markdown so you can see rendering work:\n\n"
        "- **bold** and *italic* text\n"
        "- bullet lists like this one\n"
        "- inline math such as $e^{i\\pi}+1=0$\n\n"
        "```python\n"
        "def greet(name: str) -> str:\n"
        '    return f"Hello, {name}!"\n'
        "```\n\n"
        "Connect a real model to get genuine answers."
    )


def demo_title(prompt: str) -> str:
    """A title for the demo: the first words the user wrote in the quoted exchange."""
    match = re.search(r"^user: (.+)$", prompt, flags=re.MULTILINE)
    words = re.sub(r"[^\w\s'-]", "", match.group(1) if match else "").split()
    return " ".join(words[:6]) or "Demo conversation"


def _break_json(text: str) -> str:
    broken = text[: len(text) // 2]
    try:
        json.loads(broken)
    except ValueError:
        return broken
    return _GARBAGE_BODY.decode()


def normalize_reply(reply: Any) -> dict[str, Any]:
    """Validate a scripted reply; a bare string is shorthand for ``{"content": s}``."""
    if isinstance(reply, str):
        return {"content": reply}
    if not isinstance(reply, dict):
        raise ValueError(f"a reply must be a dict or a string, got {type(reply).__name__}")
    unknown = set(reply) - REPLY_KEYS
    if unknown:
        raise ValueError(f"unknown reply keys: {sorted(unknown)}")
    if "content" in reply and "json" in reply:
        raise ValueError("a reply takes 'content' or 'json', not both")
    if "content" in reply and not isinstance(reply["content"], str):
        raise ValueError("'content' must be a string")
    if "match" in reply and not isinstance(reply["match"], str):
        raise ValueError("'match' must be a string")
    if reply.get("endpoint", "chat") not in ENDPOINTS:
        raise ValueError(f"'endpoint' must be one of {sorted(ENDPOINTS)}")
    if "finish_reason" in reply and not isinstance(reply["finish_reason"], str):
        raise ValueError("'finish_reason' must be a string")
    _check_timing_and_fault(reply)
    if "json" in reply:
        json.dumps(reply["json"])  # fail at scripting time, not mid-request
    return copy.deepcopy(reply)


def _check_timing_and_fault(values: dict[str, Any]) -> None:
    for key in ("ttft", "tps"):
        if key in values and (not _is_number(values[key]) or values[key] < 0):
            raise ValueError(f"'{key}' must be a number >= 0")
    fault = values.get("fault")
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"'fault' must be null or one of {sorted(FAULTS)}")


@dataclass(frozen=True)
class _Plan:
    content: str | None
    ttft: float
    tps: float
    fault: str | None
    finish_reason: str

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> _Plan:
        if "content" in reply:
            content: str | None = reply["content"]
        elif "json" in reply:
            content = json.dumps(reply["json"])
        else:
            content = None
        return cls(
            content=content,
            ttft=float(reply.get("ttft", 0)),
            tps=float(reply.get("tps", 0)),
            fault=reply.get("fault"),
            finish_reason=reply.get("finish_reason", "stop"),
        )


# ---------------------------------------------------------------------------- server


class StubServer:
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
        self.host = host
        self._port = port
        self.dim = default_dim() if dim is None else dim
        if self.dim < 1:
            raise ValueError("dim must be >= 1")
        self.demo = demo
        self.models = list(DEFAULT_MODELS if models is None else models)
        self._cond = threading.Condition()
        self._queue: list[dict[str, Any]] = []
        self._requests: list[dict[str, Any]] = []
        self._first_token_seconds: list[float] = []
        self._defaults: dict[str, Any] = {"ttft": 0.0, "tps": 0.0, "fault": None}
        self._stopping = threading.Event()
        self._httpd: _StubHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------------

    def start(self) -> StubServer:
        if self._httpd is not None or self._stopping.is_set():
            raise RuntimeError("StubServer can only be started once")
        self._httpd = _StubHTTPServer((self.host, self._port), self)
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

    # scripting -------------------------------------------------------------------

    def script(self, *replies: dict[str, Any] | str) -> None:
        """Append scripted replies to the FIFO queue (all validated before any is queued)."""
        normalized = [normalize_reply(r) for r in replies]
        with self._cond:
            self._queue.extend(normalized)

    def set_defaults(self, **kw: Any) -> None:
        """Persistent ``ttft``/``tps``/``fault`` for chat requests no scripted reply matches."""
        unknown = set(kw) - DEFAULT_KEYS
        if unknown:
            raise ValueError(f"unknown default keys: {sorted(unknown)}")
        _check_timing_and_fault(kw)
        with self._cond:
            self._defaults.update(kw)

    @property
    def defaults(self) -> dict[str, Any]:
        with self._cond:
            return dict(self._defaults)

    def reset(self) -> None:
        """Clear the queue and the request log, and restore the default settings."""
        with self._cond:
            self._queue.clear()
            self._requests.clear()
            self._defaults = {"ttft": 0.0, "tps": 0.0, "fault": None}

    @property
    def pending(self) -> list[dict[str, Any]]:
        with self._cond:
            return copy.deepcopy(self._queue)

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._cond:
            return copy.deepcopy(self._requests)

    @property
    def first_token_seconds(self) -> list[float]:
        """Per streamed chat reply: from its request arriving to its first text sent.

        The stub's own time to first token (the scripted ttft, or its handling when that takes
        longer, plus the scheduling of its thread), which a benchmark subtracts to find what the
        caller itself added.
        """
        with self._cond:
            return list(self._first_token_seconds)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(
                    f"expected {n} requests within {timeout}s, got {len(self._requests)}"
                )
            return copy.deepcopy(self._requests)

    # used by the handler -----------------------------------------------------------

    def _record(self, path: str, body: Any) -> None:
        with self._cond:
            self._requests.append({"path": path, "body": copy.deepcopy(body)})
            self._cond.notify_all()

    def _take_plan(self, endpoint: str, text: str) -> _Plan:
        with self._cond:
            for index, reply in enumerate(self._queue):
                if reply.get("endpoint", "chat") != endpoint:
                    continue
                match = reply.get("match")
                if match is not None and match not in text:
                    continue
                del self._queue[index]
                return _Plan.from_reply(reply)
            if endpoint != "chat":
                return _Plan(None, 0.0, 0.0, None, "stop")
            defaults = dict(self._defaults)
        return _Plan(
            content=None,
            ttft=float(defaults["ttft"]),
            tps=float(defaults["tps"]),
            fault=defaults["fault"],
            finish_reason="stop",
        )

    def _default_chat_content(self, body: dict[str, Any], messages: list[Any]) -> str:
        response_format = body.get("response_format")
        if isinstance(response_format, dict):
            if response_format.get("type") == "json_schema":
                spec = response_format.get("json_schema") or {}
                return json.dumps(schema_instance(spec.get("schema") or {}))
            if response_format.get("type") == "json_object":
                return "{}"
        last_user = _last_user_text(messages)
        if self.demo or body.get("model") == "demo":
            if "Reply with the title only" in last_user:
                return demo_title(last_user)
            return demo_reply(last_user)
        return f"Stub reply to: {last_user[:200]}"

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops first; returns False when it did."""
        if seconds <= 0:
            return not self._stopping.is_set()
        return not self._stopping.wait(seconds)


class _StubHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], stub: StubServer) -> None:
        self.stub = stub
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn) that can stall.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return
        logger.exception("LLM stub: unhandled error serving %s", client_address)

    def disconnect_all(self) -> None:
        """Close kept-alive and in-flight connections so their threads end promptly."""
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _BadRequest(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ThalamusLLMStub/1.0"
    disable_nagle_algorithm = True
    timeout = 300  # idle keep-alive connections
    server: _StubHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request is logged by _dispatch instead

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    @property
    def stub(self) -> StubServer:
        return self.server.stub

    # plumbing --------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        started = self._started = time.monotonic()
        self._status = "-"
        self._note = ""
        self._headers_sent = False
        path = urlsplit(self.path).path
        try:
            body = self._read_json() if method == "POST" else None
            self._route(method, path, body)
        except _BadRequest as exc:
            self._send_error_json(400, str(exc), "invalid_request_error")
        except OSError:
            self.close_connection = True
            self._note = self._note or " (connection lost)"
        except Exception:
            logger.exception("LLM stub: error handling %s %s", method, path)
            self.close_connection = True
            if not self._headers_sent:
                with contextlib.suppress(OSError):
                    self._send_error_json(500, "stub internal error", "server_error")
        finally:
            elapsed = (time.monotonic() - started) * 1000
            logger.info("%s %s -> %s%s (%.0f ms)", method, path, self._status, self._note, elapsed)

    def _read_json(self) -> Any:
        try:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                raw = self._read_chunked()
            else:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length > 0 else b""
        except ValueError as exc:
            self.close_connection = True
            raise _BadRequest("malformed request body framing") from exc
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise _BadRequest(f"request body is not valid JSON: {exc}") from exc

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            size = int(self.rfile.readline(65537).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _send_bytes(self, status: int, data: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self._headers_sent = True
        self._status = str(status)
        self.wfile.write(data)

    def _send_json(self, status: int, payload: Any) -> None:
        self._send_bytes(status, json.dumps(payload).encode("utf-8"))

    def _send_error_json(
        self, status: int, message: str, err_type: str, code: str | None = None
    ) -> None:
        error = {"message": message, "type": err_type, "param": None, "code": code}
        self._send_json(status, {"error": error})

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._headers_sent = True
        self._status = "200"

    def _write_chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        else:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write_event(self, payload: Any) -> None:
        self._write_chunk(b"data: " + json.dumps(payload).encode("utf-8") + b"\n\n")

    def _drop(self) -> None:
        """Close the socket abruptly: no (further) response bytes, no [DONE]."""
        self.close_connection = True
        self._note = " (dropped)"
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _abort_until_first_token(self, ttft: float) -> bool:
        """Wait until `ttft` after the request arrived (reading and parsing it count towards it,
        as they do for a real server), then as `_abort_if_stopping`."""
        return self._abort_if_stopping(ttft - (time.monotonic() - self._started))

    def _abort_if_stopping(self, seconds: float) -> bool:
        if self.stub._sleep(seconds):
            return False
        self._drop()
        self._note = " (server stopping)"
        return True

    # routing ---------------------------------------------------------------------

    def _route(self, method: str, path: str, body: Any) -> None:
        if path.startswith("/_stub/"):
            self._control(method, path, body)
            return
        api = path[3:] if path.startswith("/v1/") else path
        api = api.rstrip("/") or "/"
        if method == "GET" and api == "/models":
            self._send_json(
                200, {"object": "list", "data": [self._model(m) for m in self.stub.models]}
            )
        elif method == "GET" and api.startswith("/models/"):
            model = api[len("/models/") :]
            if model in self.stub.models:
                self._send_json(200, self._model(model))
            else:
                self._send_error_json(
                    404, f"model {model!r} not found", "invalid_request_error", "model_not_found"
                )
        elif method == "POST" and api in ("/chat/completions", "/embeddings"):
            if not isinstance(body, dict):
                raise _BadRequest("request body must be a JSON object")
            self.stub._record(path, body)
            if api == "/chat/completions":
                self._chat(body)
            else:
                self._embeddings(body)
        else:
            self._send_error_json(404, f"no route for {method} {path}", "invalid_request_error")

    @staticmethod
    def _model(model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "created": 0, "owned_by": "thalamus-stub"}

    def _control(self, method: str, path: str, body: Any) -> None:
        stub = self.stub
        route = (method, path.rstrip("/"))
        try:
            if route == ("POST", "/_stub/script"):
                replies = body if isinstance(body, list) else [body]
                stub.script(*replies)
                self._send_json(200, {"queued": len(stub.pending)})
            elif route == ("GET", "/_stub/script"):
                self._send_json(200, stub.pending)
            elif route == ("POST", "/_stub/defaults"):
                if not isinstance(body, dict):
                    raise ValueError("defaults must be a JSON object")
                stub.set_defaults(**body)
                self._send_json(200, {"defaults": stub.defaults})
            elif route == ("POST", "/_stub/reset"):
                stub.reset()
                self._send_json(200, {"ok": True})
            elif route == ("GET", "/_stub/requests"):
                self._send_json(200, stub.requests)
            else:
                self._send_error_json(404, f"no route for {method} {path}", "invalid_request_error")
        except ValueError as exc:
            raise _BadRequest(str(exc)) from exc

    # fault handling shared by chat and embeddings ----------------------------------

    def _apply_fault(self, plan: _Plan, stream: bool = False) -> bool:
        """Answer error faults up front; a streaming "drop" is left to the stream itself."""
        if plan.fault in ("http_500", "http_429") or (plan.fault == "drop" and not stream):
            self._note = f" [{plan.fault}]"
            if self._abort_if_stopping(plan.ttft):
                return True
            if plan.fault == "drop":
                self._drop()
            elif plan.fault == "http_500":
                self._send_error_json(500, "Scripted stub failure", "server_error", "stub_fault")
            else:
                self._send_error_json(
                    429, "Scripted rate limit", "rate_limit_error", "rate_limit_exceeded"
                )
            return True
        return False

    # chat --------------------------------------------------------------------------

    def _chat(self, body: dict[str, Any]) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise _BadRequest("'messages' must be a list")
        prompt_text = _messages_text(messages)
        plan = self.stub._take_plan("chat", prompt_text)
        stream = bool(body.get("stream"))
        model = body.get("model") or DEFAULT_CHAT_MODEL

        ttft = plan.ttft
        if plan.fault == "hang":
            self._note = " [hang]"
            if self._abort_if_stopping(plan.ttft or HANG_SECONDS):
                return
            ttft = 0.0
        if self._apply_fault(plan, stream):
            return

        try:
            content = plan.content
            if content is None:
                content = self.stub._default_chat_content(body, messages)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise _BadRequest(f"cannot build a reply for response_format: {exc}") from exc

        garbage_body = False
        if plan.fault == "garbage":
            self._note = " [garbage]"
            response_format = body.get("response_format")
            if isinstance(response_format, dict) and response_format.get("type") in (
                "json_object",
                "json_schema",
            ):
                content = _break_json(content)
            else:
                garbage_body = True

        usage = {
            "prompt_tokens": count_tokens(prompt_text),
            "completion_tokens": count_tokens(content),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        completion_id = f"chatcmpl-stub-{uuid.uuid4().hex[:24]}"

        if stream:
            self._stream_chat(body, plan, ttft, content, model, completion_id, usage, garbage_body)
            return
        if self._abort_until_first_token(ttft):
            return
        if garbage_body:
            self._send_bytes(200, _GARBAGE_BODY)
            return
        self._send_json(
            200,
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "system_fingerprint": "thalamus-stub",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content, "refusal": None},
                        "logprobs": None,
                        "finish_reason": plan.finish_reason,
                    }
                ],
                "usage": usage,
            },
        )

    def _stream_chat(
        self,
        body: dict[str, Any],
        plan: _Plan,
        ttft: float,
        content: str,
        model: str,
        completion_id: str,
        usage: dict[str, int],
        garbage_body: bool,
    ) -> None:
        stream_options = body.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(
            stream_options.get("include_usage")
        )
        created = int(time.time())

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "thalamus-stub",
                "choices": choices,
                **extra,
            }

        def delta(fields: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": fields, "logprobs": None, "finish_reason": finish_reason}
            return chunk([choice])

        self._start_stream()
        if self._abort_until_first_token(ttft):
            return
        self._write_event(delta({"role": "assistant", "content": ""}))
        if garbage_body:
            self._write_chunk(b"data: " + _GARBAGE_BODY + b"\n\n")
            self._write_chunk(b"")
            return

        tokens = split_tokens(content)
        cut = len(tokens) // 2 if plan.fault == "drop" else None
        started = time.monotonic()
        for index, token in enumerate(tokens):
            if index == cut:
                break
            if plan.tps > 0 and index > 0:
                delay = started + index / plan.tps - time.monotonic()
                if delay > 0 and self._abort_if_stopping(delay):
                    return
            self._write_event(delta({"content": token}))
            if index == 0:
                with self.stub._cond:
                    self.stub._first_token_seconds.append(time.monotonic() - self._started)
        if cut is not None:
            self._drop()
            return

        self._write_event(delta({}, plan.finish_reason))
        if include_usage:
            self._write_event(chunk([], usage=usage))
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")

    # embeddings --------------------------------------------------------------------

    def _embeddings(self, body: dict[str, Any]) -> None:
        texts = self._embedding_texts(body.get("input"))
        dimensions = body.get("dimensions")
        if dimensions is None:
            dim = self.stub.dim
        elif _is_number(dimensions) and int(dimensions) == dimensions and dimensions > 0:
            dim = int(dimensions)
        else:
            raise _BadRequest("'dimensions' must be a positive integer")

        plan = self.stub._take_plan("embeddings", "\n".join(texts))
        if plan.fault == "hang":
            self._note = " [hang]"
            if self._abort_if_stopping(plan.ttft or HANG_SECONDS):
                return
        elif self._apply_fault(plan) or self._abort_until_first_token(plan.ttft):
            return
        if plan.fault == "garbage":
            self._note = " [garbage]"
            self._send_bytes(200, b'{"data": [')
            return

        base64_format = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = embed_text(text, dim)
            embedding: Any = (
                base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode("ascii")
                if base64_format
                else vector
            )
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(count_tokens(text) for text in texts)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or DEFAULT_EMBED_MODEL,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    @staticmethod
    def _embedding_texts(raw: Any) -> list[str]:
        if isinstance(raw, str):
            return [raw]
        if isinstance(raw, list) and raw:
            if all(isinstance(item, str) for item in raw):
                return list(raw)
            # Token-id input: hash the ids as words so the result is still deterministic.
            if all(isinstance(item, int) for item in raw):
                return [" ".join(map(str, raw))]
            if all(isinstance(item, list) for item in raw):
                return [" ".join(map(str, item)) for item in raw]
        raise _BadRequest("'input' must be a string or a non-empty list of strings")


# ------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m apps.core.llm_stub", description="OpenAI-compatible LLM stub server"
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
