"""The stub's HTTP plumbing: the threading server that can drop every connection at once, and
the handler's reading, writing, streaming, pacing and faults that chat and embeddings share."""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from llm_stub.scripts import Plan
from llm_stub.state import StubState

logger = logging.getLogger("thalamus.llm_stub")

HANG_SECONDS = 30.0
# Faults answered at once with an error no retry can fix: (status, message, type, code).
REFUSALS = {
    "http_401": (401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key"),
    "http_422": (
        422,
        "Unprocessable request: 'messages' has an unsupported shape",
        "invalid_request_error",
        "unprocessable_entity",
    ),
}


class StubHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], stub: StubState, handler: type[BaseHandler]
    ) -> None:
        self.stub = stub
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, handler)

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


class BadRequest(Exception):
    pass


class BaseHandler(BaseHTTPRequestHandler):
    """What every endpoint needs; ``Handler._dispatch`` (routes.py) sets the per-request state
    (``_started``, ``_status``, ``_note``, ``_headers_sent``, ``_plan``) it reads."""

    protocol_version = "HTTP/1.1"
    server_version = "ThalamusLLMStub/1.0"
    disable_nagle_algorithm = True
    timeout = 300  # idle keep-alive connections
    server: StubHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request is logged by _dispatch instead

    @property
    def stub(self) -> StubState:
        return self.server.stub

    def _read_json(self) -> Any:
        try:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                raw = self._read_chunked()
            else:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length > 0 else b""
        except ValueError as exc:
            self.close_connection = True
            raise BadRequest("malformed request body framing") from exc
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise BadRequest(f"request body is not valid JSON: {exc}") from exc

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

    def _send_bytes(
        self,
        status: int,
        data: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._headers_sent = True
        self._status = str(status)
        self.wfile.write(data)

    def _send_json(self, status: int, payload: Any) -> None:
        self._send_bytes(status, json.dumps(payload).encode("utf-8"))

    def _send_error_json(
        self,
        status: int,
        message: str,
        err_type: str,
        code: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        error = {"message": message, "type": err_type, "param": None, "code": code}
        headers = {"Retry-After": str(retry_after)} if retry_after else None
        self._send_bytes(status, json.dumps({"error": error}).encode("utf-8"), headers=headers)

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
        as they do for a real server); True if the server stops or the client leaves first,
        as a server stops reading the prompt of a client that left."""
        return self._abort_while_generating(ttft - (time.monotonic() - self._started))

    def _abort_while_generating(self, seconds: float) -> bool:
        """Take `seconds` to generate, stopping early (True) if the server stops or the client
        goes away, as a real server stops generating for a client that left."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._abort_if_stopping(min(left, 0.05)):
                return True
            if self._client_gone():
                self._client_left()
                return True
        return False

    def _client_left(self) -> None:
        self._drop()
        self._note = " (client gone)"
        plan = getattr(self, "_plan", None)
        if plan is not None:
            self.stub._give_back(plan)

    def _client_gone(self) -> bool:
        """True once the client has closed its end of the connection."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _abort_if_stopping(self, seconds: float) -> bool:
        if self.stub._sleep(seconds):
            return False
        self._drop()
        self._note = " (server stopping)"
        return True

    # fault handling shared by chat and embeddings ----------------------------------

    def _apply_fault(self, plan: Plan, stream: bool = False) -> bool:
        """Answer error faults up front; a streaming "drop" is left to the stream itself."""
        dropped = plan.fault in ("drop", "drop_done") and not stream
        if plan.fault in REFUSALS:
            self._note = f" [{plan.fault}]"
            self._send_error_json(*REFUSALS[plan.fault])
            return True
        if plan.fault in ("http_500", "http_429") or dropped:
            self._note = f" [{plan.fault}]"
            if self._abort_if_stopping(plan.ttft):
                return True
            if dropped:
                self._drop()
            elif plan.fault == "http_500":
                self._send_error_json(
                    500,
                    "Scripted stub failure",
                    "server_error",
                    "stub_fault",
                    retry_after=plan.retry_after,
                )
            else:
                self._send_error_json(
                    429,
                    "Scripted rate limit",
                    "rate_limit_error",
                    "rate_limit_exceeded",
                    retry_after=plan.retry_after,
                )
            return True
        return False
