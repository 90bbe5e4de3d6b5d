"""The openai SDK, held in one place: cached clients, plain JSON requests, and the SDK's errors
turned into the gateway's outcomes.

Clients are cached: a new one per call would open a new connection pool every turn, which costs
more than the whole of Thalamus's own work on the hot path. Requests are plain POSTs whose
replies stay dicts: the SDK's typed transform costs about 4 ms for a dozen messages, and the
gateway reads three fields of each chunk.

The SDK is imported where it is used: importing it takes ~0.5 s of CPU, which every process
(`up`, each web and Celery process, each command) paid at start for a call it may not make yet;
a web process imports it while it warms up (apps/core/warmup.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from functools import cache, lru_cache
from typing import TYPE_CHECKING

from django.conf import settings

from apps.core.llm.outcomes import InvalidReply, LLMError, Refused, TimedOut, TooLong, Unreachable

# A 400 about the request's size names the context, not the format or the tools.
CONTEXT_ERROR = re.compile(r"context (size|length|window)|too long|too many tokens", re.I)
_TOOLS_REFUSAL = re.compile(r"tool|jinja|function.call", re.I)
_FORMAT_REFUSAL = re.compile(r"response_format|json_schema|json_object|grammar", re.I)

if TYPE_CHECKING:
    import openai
    from openai import AsyncOpenAI, AsyncStream, OpenAI, Stream


class ToolsRefused(Refused):
    """The server has no tool calling (llama.cpp without --jinja: HTTP 500 "tools param requires
    --jinja flag"; Ollama: HTTP 400 "... does not support tools")."""


class FormatRefused(Refused):
    """The server does not take this `response_format`."""


@lru_cache(maxsize=16)
def _sync_client(base_url: str, api_key: str, timeout: float) -> OpenAI:
    from openai import OpenAI

    return OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)


_async_clients: dict[tuple, AsyncOpenAI] = {}


def sync_client(base_url: str, *, timeout: float) -> OpenAI:
    from apps.core.llm.servers import endpoint_api_key

    return _sync_client(base_url, endpoint_api_key(base_url), float(timeout))


def async_client(base_url: str, *, timeout: float) -> AsyncOpenAI:
    # An async client's connection pool belongs to the event loop that first used it.
    from apps.core.llm.servers import endpoint_api_key

    key = (id(asyncio.get_running_loop()), base_url, endpoint_api_key(base_url), float(timeout))
    client = _async_clients.get(key)
    if client is None:
        from openai import AsyncOpenAI

        if len(_async_clients) > 32:
            _async_clients.clear()
        client = _async_clients[key] = AsyncOpenAI(
            base_url=key[1], api_key=key[2], timeout=key[3], max_retries=0
        )
    return client


def post(base_url: str, path: str, body: dict, *, timeout: float) -> object:
    """POST `body` to the server; its JSON reply as plain data. Raises outcomes."""
    with sdk_errors(base_url, body.get("model", "")):
        return sync_client(base_url, timeout=timeout).post(path, body=body, cast_to=object)


def open_stream(base_url: str, body: dict, *, timeout: float) -> Stream[object]:
    """POST /chat/completions with stream=true; its chunks come as plain dicts."""
    from openai import Stream

    with sdk_errors(base_url, body.get("model", "")):
        return sync_client(base_url, timeout=timeout).post(
            "/chat/completions",
            body={**body, "stream": True},
            cast_to=object,
            stream=True,
            stream_cls=Stream[object],
        )


async def aopen_stream(base_url: str, body: dict, *, timeout: float) -> AsyncStream[object]:
    from openai import AsyncStream

    with sdk_errors(base_url, body.get("model", "")):
        return await async_client(base_url, timeout=timeout).post(
            "/chat/completions",
            body={**body, "stream": True},
            cast_to=object,
            stream=True,
            stream_cls=AsyncStream[object],
        )


def list_models(base_url: str, *, timeout: float) -> list[str]:
    """The ids of the models the server lists (GET /models). Raises outcomes."""
    with sdk_errors(base_url, ""):
        return [model.id for model in sync_client(base_url, timeout=timeout).models.list()]


def hang_up(response) -> None:
    """Close a response another thread is reading: shut its socket, so that the read ends now
    and the server sees the client leave (closing the response alone waits for the read)."""
    network_stream = response.extensions.get("network_stream")
    sock = network_stream.get_extra_info("socket") if network_stream is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    response.close()


@contextlib.contextmanager
def sdk_errors(base_url: str, model: str):
    """Turn the SDK's exceptions raised inside into outcomes."""
    try:
        yield
    except Exception as exc:
        import openai

        if not isinstance(exc, openai.OpenAIError | ValueError):
            raise
        # ValueError: a streamed event that is not JSON.
        if isinstance(exc, LLMError):
            raise
        raise outcome_of(exc, base_url=base_url, model=model) from exc


def outcome_of(exc: Exception, *, base_url: str, model: str) -> LLMError:
    import openai

    where = {"base_url": base_url, "model": model}
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        error = TimedOut(f"{model or 'the model'} at {base_url} took too long to answer", **where)
        error.reason = "timed out"
        return error
    if isinstance(exc, openai.APIConnectionError):
        error = Unreachable(f"{base_url} could not be reached", **where)
        error.reason = "unreachable"
        return error
    if isinstance(exc, openai.APIStatusError):
        text = str(exc)
        said = _said(exc)
        sentence = f"HTTP {exc.status_code} from {model or base_url}" + (
            f": {said}"[:300] if said else ""
        )
        status = {"status_code": exc.status_code, **where}
        error = _status_outcome(exc, text, sentence, status)
        error.reason = f"HTTP {exc.status_code}" + (f": {said}"[:200] if said else "")
        return error
    if isinstance(exc, openai.APIResponseValidationError | ValueError):
        return InvalidReply(f"{model or base_url} sent a reply that is not JSON", **where)
    return Unreachable(f"{type(exc).__name__}: {exc}"[:300], **where)


def _status_outcome(exc: openai.APIStatusError, text: str, sentence: str, status: dict):
    if exc.status_code in (400, 413) and CONTEXT_ERROR.search(text):
        return TooLong(sentence, **status)
    if exc.status_code in (400, 404, 422, 500, 501) and _TOOLS_REFUSAL.search(text):
        return ToolsRefused(sentence, **status)
    if exc.status_code in (400, 422) and _FORMAT_REFUSAL.search(text):
        return FormatRefused(sentence, **status)
    if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
        return Unreachable(sentence, **status)
    return Refused(sentence, **status)


def _said(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        body = body.get("error", body)
        body = body.get("message", body) if isinstance(body, dict) else body
    return body if isinstance(body, str) else (exc.message or "")


def falls_back(error: LLMError) -> bool:
    """Is the failure the endpoint's, so that the next of the role's chain may answer? A server
    not there or too slow, a model it does not have (Ollama's 404), a server error; not a 400,
    which any model would answer to the same request."""
    return isinstance(error, Unreachable) or (
        isinstance(error, Refused)
        and not isinstance(error, ToolsRefused | FormatRefused)
        and error.status_code == 404
    )


@cache  # once a process: a process forked from one that did needs it no more
def sdk_load() -> None:
    """Import the SDK and the HTTP stack under it as a first call would, without connecting:
    the web server does before it forks its processes, so that neither /healthz's first look at
    the LLM nor a first turn waits for the imports (133 modules, ~0.7 s of CPU under load)."""
    import httpx
    from openai import AsyncOpenAI, OpenAI

    OpenAI(base_url="http://127.0.0.1/v1", api_key="-").close()
    AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key="-")
    httpx.Client().close()


def default_timeout() -> float:
    return float(settings.THALAMUS_LLM_TIMEOUT)
