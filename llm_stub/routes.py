"""The stub's routes: the OpenAI API (models, chat, embeddings), what llama.cpp and Ollama add,
and the ``/_stub/*`` control endpoints through which other processes script the stub."""

from __future__ import annotations

import base64
import contextlib
import logging
import struct
import time
from typing import Any
from urllib.parse import urlsplit

from llm_stub.chat import ChatHandler
from llm_stub.embeddings import DEFAULT_EMBED_MODEL, embed_text
from llm_stub.handler import HANG_SECONDS, BadRequest
from llm_stub.schemas import is_number
from llm_stub.state import DEFAULT_CHAT_MODEL
from llm_stub.tokens import count_tokens

logger = logging.getLogger("thalamus.llm_stub")


class Handler(ChatHandler):
    """Every request starts in ``_dispatch``, which logs one line for it."""

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        self._plan = None
        started = self._started = time.monotonic()
        self._status = "-"
        self._note = ""
        self._headers_sent = False
        path = urlsplit(self.path).path
        try:
            body = self._read_json() if method == "POST" else None
            self._route(method, path, body)
        except BadRequest as exc:
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

    # routing ---------------------------------------------------------------------

    def _route(self, method: str, path: str, body: Any) -> None:
        if path.startswith("/_stub/"):
            self._control(method, path, body)
            return
        server = self.stub.defaults["server"]
        if server == "llamacpp" and (method, path) == ("GET", "/props"):
            self._llamacpp_props()
            return
        if server == "ollama" and (method, path) == ("POST", "/api/show"):
            self._ollama_show(body)
            return
        if server == "ollama" and (method, path) == ("GET", "/api/ps"):
            self._ollama_ps()
            return
        api = path[3:] if path.startswith("/v1/") else path
        api = api.rstrip("/") or "/"
        missing = self.stub.defaults["missing_models"]
        if method == "GET" and api == "/models":
            listed = [self._model(m) for m in self.stub.models if m not in missing]
            self._send_json(200, {"object": "list", "data": listed})
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
                raise BadRequest("request body must be a JSON object")
            entry = self.stub._record(path, body)
            # Which key the client sent, so tests can tell where an operator's key went.
            entry["authorization"] = self.headers.get("Authorization")
            if body.get("model") in missing:
                # Ollama's /v1 for a model not pulled.
                message = f'model "{body["model"]}" not found, try pulling it first'
                self._send_error_json(404, message, "not_found_error")
            elif api == "/chat/completions":
                self._chat(body, entry)
            else:
                self._embeddings(body)
        else:
            self._send_error_json(404, f"no route for {method} {path}", "invalid_request_error")

    def _model(self, model: str) -> dict[str, Any]:
        entry = {"id": model, "object": "model", "created": 0, "owned_by": "thalamus-stub"}
        settings = self.stub.defaults
        if settings["server"] == "vllm":
            entry["max_model_len"] = settings["context"] or 4096
        return entry

    def _llamacpp_props(self) -> None:
        settings = self.stub.defaults
        model = self.stub.models[0] if self.stub.models else DEFAULT_CHAT_MODEL
        self._send_json(
            200,
            {
                "default_generation_settings": {
                    "n_ctx": settings["context"] or 4096,
                    "params": {"n_predict": -1},
                },
                "total_slots": settings["slots"] or 1,
                "model_path": f"/models/{model}.gguf",
                "build_info": "stub",
            },
        )

    def _ollama_ps(self) -> None:
        """The models loaded (those asked to chat since the last reset) and the window each
        runs with: the one a prompt is cut to."""
        context = self.stub.defaults["context"] or 4096
        loaded = dict.fromkeys(
            entry["body"].get("model")
            for entry in self.stub.requests
            if entry["path"].endswith("/chat/completions") and isinstance(entry["body"], dict)
        )
        self._send_json(
            200,
            {
                "models": [
                    {"name": model, "model": model, "size_vram": 0, "context_length": context}
                    for model in loaded
                    if isinstance(model, str)
                ]
            },
        )

    def _ollama_show(self, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        model = body.get("model") or body.get("name")
        if model not in self.stub.models or model in self.stub.defaults["missing_models"]:
            self._send_json(404, {"error": f"model '{model}' not found"})
            return
        context = self.stub.defaults["context"]
        parameters = 'stop "<|im_end|>"'
        if context is not None and self.stub.defaults["modelfile_num_ctx"]:
            parameters = f"num_ctx {context}\n{parameters}"
        self._send_json(
            200,
            {
                "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
                "parameters": parameters,
                "details": {
                    "format": "gguf",
                    "family": "qwen2",
                    "parameter_size": "7.6B",
                    "quantization_level": "Q4_K_M",
                },
            },
        )

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
            elif route == ("GET", "/_stub/stats"):
                self._send_json(
                    200, {"max_concurrent": stub.max_concurrent, "requests": len(stub.requests)}
                )
            else:
                self._send_error_json(404, f"no route for {method} {path}", "invalid_request_error")
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc

    # embeddings --------------------------------------------------------------------

    def _embeddings(self, body: dict[str, Any]) -> None:
        texts = self._embedding_texts(body.get("input"))
        dimensions = body.get("dimensions")
        if dimensions is None:
            dim = self.stub.dim
        elif is_number(dimensions) and int(dimensions) == dimensions and dimensions > 0:
            dim = int(dimensions)
        else:
            raise BadRequest("'dimensions' must be a positive integer")

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
        raise BadRequest("'input' must be a string or a non-empty list of strings")
