"""The one way to build an OpenAI-compatible client for the configured LLM endpoint.

Clients are cached: a new one per call would open a new connection pool every turn, which
costs more than the whole of Thalamus's own work on the hot path.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import openai
from django.conf import settings
from openai import AsyncOpenAI, AsyncStream, OpenAI

from apps.core.metrics import error_kind, record_llm_call

if TYPE_CHECKING:
    from apps.core.llm_limits import Endpoint
    from apps.core.models import RuntimeConfig

logger = logging.getLogger(__name__)


@lru_cache(maxsize=16)
def _sync_client(base_url: str, api_key: str, timeout: float, max_retries: int) -> OpenAI:
    return OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)


_async_clients: dict[tuple, AsyncOpenAI] = {}


def llm_client(*, timeout: float = 60.0, max_retries: int = 0, base_url: str | None = None):
    from apps.core.llm_limits import endpoint_api_key

    base_url = base_url or settings.THALAMUS_LLM_BASE_URL
    return _sync_client(base_url, endpoint_api_key(base_url), float(timeout), max_retries)


def async_llm_client(*, timeout: float = 60.0, max_retries: int = 0, base_url: str | None = None):
    # An async client's connection pool belongs to the event loop that first used it.
    from apps.core.llm_limits import endpoint_api_key

    base_url = base_url or settings.THALAMUS_LLM_BASE_URL
    key = (
        id(asyncio.get_running_loop()),
        base_url,
        endpoint_api_key(base_url),
        float(timeout),
        max_retries,
    )
    client = _async_clients.get(key)
    if client is None:
        if len(_async_clients) > 32:
            _async_clients.clear()
        client = _async_clients[key] = AsyncOpenAI(
            base_url=key[1], api_key=key[2], timeout=key[3], max_retries=max_retries
        )
    return client


async def stream_chat_chunks(client: AsyncOpenAI, **body) -> AsyncStream[object]:
    """POST /chat/completions with stream=true; the chunks come back as plain dicts.

    `client.chat.completions.create` runs every request through the SDK's typed transform (about
    4 ms for a dozen messages on our machine) and builds a model per chunk; the answer's
    messages are plain JSON already, and the hot path reads three fields of each chunk. Errors
    (HTTP status, connection, timeout) are the SDK's own exceptions, as with `create`.
    """
    return await client.post(
        "/chat/completions",
        body={**body, "stream": True},
        cast_to=object,
        stream=True,
        stream_cls=AsyncStream[object],
    )


# ------------------------------------------------------------------ the chat first, then the rest
#
# A local server answers one request at a time (llama.cpp's one slot, Ollama's one model
# runner), so a reflection running when the user sends a message would hold the answer back for
# as long as it generates. While an answer streams from an endpoint, it is marked active in
# Redis; a background call to the same endpoint waits for it (bounded), and one that is already
# generating gives way — it closes its stream, which frees the server's slot at once, and asks
# again when the answer is done.

CHAT_ACTIVE_SECONDS = 120
POLL_SECONDS = 0.2
# How often a generating background call looks for an answer to give way to: the answer's first
# token waits this long at most, on top of the server freeing its slot.
GIVE_WAY_CHECK_SECONDS = 0.05


def _active_key(base_url: str) -> str:
    from django.core.cache import cache

    digest = hashlib.sha1(base_url.encode()).hexdigest()[:16]
    return cache.make_key(f"llm:chat-active:{digest}")


def _redis():
    from apps.core.cache import redis_client

    return redis_client()


def chat_active_mark(*, base_url: str, reply_id: int) -> None:
    """The answer `reply_id` is (still) generating at `base_url`; renewed while it runs."""
    with _redis_outage_logged("marking"):
        _redis().zadd(_active_key(base_url), {str(reply_id): time.time() + CHAT_ACTIVE_SECONDS})


def chat_active_clear(*, base_url: str, reply_id: int) -> None:
    with _redis_outage_logged("clearing"):
        _redis().zrem(_active_key(base_url), str(reply_id))


@contextlib.contextmanager
def _redis_outage_logged(doing: str):
    # The mark only makes background calls wait, and lapses by itself: while Redis restarts,
    # the answer goes on and is saved without it.
    from redis.exceptions import RedisError

    try:
        yield
    except (RedisError, OSError) as exc:
        logger.warning("%s the active chat mark failed: %s", doing, exc)


def chat_active(base_url: str) -> bool:
    return _redis().zcount(_active_key(base_url), time.time(), "+inf") > 0


def wait_for_chat(base_url: str, *, until: float) -> float:
    """Wait while an answer streams from `base_url`, until the monotonic time `until`."""
    started = time.monotonic()
    while time.monotonic() < until and chat_active(base_url):
        time.sleep(POLL_SECONDS)
    return time.monotonic() - started


@dataclass
class Completion:
    content: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    waited_seconds: float = 0.0
    gave_way: int = 0
    # The endpoint that answered, and those of the role's chain that failed before it.
    model: str = ""
    base_url: str = ""
    fallback_from: list[dict] = field(default_factory=list)


class _GaveWay(Exception):
    pass


def falls_back(exc: Exception) -> bool:
    """Is the error the endpoint's, so that the next in the role's chain may answer? A server
    not there or too slow, a model it does not have (Ollama's 404), a server error; not a 400,
    which any model would answer to the same request (a prompt too long is learnt from)."""
    return isinstance(
        exc, openai.APIConnectionError | openai.NotFoundError | openai.InternalServerError
    )


def failure_reason(exc: Exception) -> str:
    """Why an endpoint failed, in a few words: "timed out", "unreachable", "HTTP 404: …"."""
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        return "unreachable"
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        said = body.get("message") if isinstance(body, dict) else body
        return f"HTTP {exc.status_code}" + (f": {said}"[:200] if isinstance(said, str) else "")
    return type(exc).__name__


def background_completion(
    *,
    role: str,
    messages: list[dict],
    response_format: dict | None = None,
    max_tokens: int | None = None,
    temperature: float = 0.2,
    done: Callable[[str], bool] | None = None,
) -> Completion:
    """One background LLM call (reflection, critic, episode, title), after the chat.

    `done(text so far)` may end the reply early: a model without end of sequence would write
    on after its JSON until max_tokens, holding the server for nothing.

    Sends max_tokens (at most the role's reply cap) and, to Ollama, the context window it is
    budgeted for; waits while an answer streams from the same endpoint, gives way to one that
    starts; a time limit per call. Raises the SDK's errors (BadRequestError for any HTTP 400);
    a refusal of a too-long prompt teaches the limits what the server's window really is.

    An endpoint that fails (see `falls_back`) hands the call to the next of the role's chain
    (`role_endpoints`), in order, with that model's own limits; the last one's error is raised.
    The completion names the endpoint that answered and what failed before it.

    A foreground role (the router, on the turn's path) neither waits nor gives way, and has
    the router's time limit.
    """
    from apps.core.llm_limits import FOREGROUND_ROLES, role_endpoints
    from apps.core.selectors import runtime_config

    config = runtime_config()
    foreground = role in FOREGROUND_ROLES
    call = {
        "role": role,
        "config": config,
        "messages": messages,
        "response_format": response_format,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "done": done,
        "timeout": float(
            config.router_timeout_seconds if foreground else config.background_timeout_seconds
        ),
        "wait_until": time.monotonic() + (0 if foreground else config.background_wait_seconds),
    }
    *fallen_through, last = role_endpoints(role, config)
    failed: list[dict] = []
    for endpoint in fallen_through:
        try:
            return _complete_at(endpoint, failed=failed, **call)
        except openai.APIError as exc:
            if not falls_back(exc):
                raise
            failed.append(
                {
                    "model": endpoint.model,
                    "base_url": endpoint.base_url,
                    "error": failure_reason(exc),
                }
            )
            logger.warning("%s: %s at %s failed (%s)", role, endpoint.model, endpoint.base_url, exc)
    return _complete_at(last, failed=failed, **call)


def _complete_at(
    endpoint: Endpoint,
    *,
    role: str,
    config: RuntimeConfig,
    messages: list[dict],
    response_format: dict | None,
    max_tokens: int | None,
    temperature: float,
    done: Callable[[str], bool] | None,
    timeout: float,
    wait_until: float,
    failed: list[dict],
) -> Completion:
    """The call of `background_completion` at one endpoint of the role's chain."""
    from apps.core.llm_limits import learn_from_refusal, model_limits, usage_check

    limits = model_limits(role, config, endpoint)
    body: dict = {
        "model": endpoint.model,
        "messages": messages,
        "temperature": temperature,
        "max_tokens": min(max_tokens or limits.reply_cap, limits.reply_cap),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if response_format is not None:
        body["response_format"] = response_format
    extra_body = {"options": {"num_ctx": limits.context}} if limits.server == "ollama" else None
    client = llm_client(base_url=endpoint.base_url, timeout=timeout)
    waited = 0.0
    gave_way = 0
    while True:
        waited += wait_for_chat(endpoint.base_url, until=wait_until)
        # Within its wait (background_wait_seconds) a call gives way as often as answers come;
        # past it, it runs to its end, so a busy chat delays background work but never starves it.
        may_give_way = time.monotonic() < wait_until
        try:
            completion = _collect(
                client,
                body,
                role=role,
                extra_body=extra_body,
                timeout=timeout,
                base_url=endpoint.base_url if may_give_way else None,
                done=done,
            )
        except _GaveWay:
            gave_way += 1
            continue
        except openai.BadRequestError as exc:
            learn_from_refusal(endpoint=endpoint, messages=messages, error=str(exc))
            raise
        usage_check(
            endpoint=endpoint,
            messages=messages,
            prompt_tokens=completion.prompt_tokens,
            role=role,
        )
        completion.waited_seconds = round(waited, 3)
        completion.gave_way = gave_way
        completion.model = endpoint.model
        completion.base_url = endpoint.base_url
        completion.fallback_from = failed
        return completion


def _hang_up(response) -> None:
    """Close a response another thread is reading: shut its socket, so that the read ends now
    and the server sees the client leave (closing the response alone waits for the read)."""
    network_stream = response.extensions.get("network_stream")
    sock = network_stream.get_extra_info("socket") if network_stream is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    response.close()


def _collect(
    client: OpenAI,
    body: dict,
    *,
    role: str,
    extra_body: dict | None,
    timeout: float,
    base_url: str | None,
    done: Callable[[str], bool] | None = None,
) -> Completion:
    """Stream one completion to its end; with `base_url`, give way to an answer that starts.

    A watcher thread closes the response the moment an answer starts: the server may still be
    reading the prompt (no chunk arrives for seconds on a CPU), and closing frees its slot.

    Counted in the LLM metrics under `role`, unless it gave way (it is asked again).
    """
    started = time.monotonic()
    ttft = None
    parts: list[str] = []
    finish_reason = None
    usage = None
    closed = threading.Event()
    gave_way = threading.Event()

    def give_way_when_the_chat_starts() -> None:
        while not closed.wait(GIVE_WAY_CHECK_SECONDS):
            if chat_active(base_url):
                gave_way.set()
                _hang_up(stream.response)
                return

    try:
        stream = client.chat.completions.create(**body, extra_body=extra_body)
        if base_url is not None:
            threading.Thread(target=give_way_when_the_chat_starts, daemon=True).start()
        with stream:
            for chunk in stream:
                if chunk.usage is not None:
                    usage = chunk.usage
                if chunk.choices:
                    choice = chunk.choices[0]
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
                    if choice.delta is not None and choice.delta.content:
                        if ttft is None:
                            ttft = time.monotonic() - started
                        parts.append(choice.delta.content)
                        if (
                            done is not None
                            and "}" in choice.delta.content
                            and done("".join(parts))
                        ):
                            finish_reason = finish_reason or "stop"
                            _hang_up(stream.response)
                            break
                if time.monotonic() - started > timeout:
                    raise openai.APITimeoutError(request=stream.response.request)
    except Exception as exc:
        if gave_way.is_set():
            raise _GaveWay from None
        record_llm_call(
            role=role,
            model=body["model"],
            prompt_tokens=None,
            completion_tokens=None,
            ttft_s=ttft,
            latency_s=time.monotonic() - started,
            error=error_kind(exc),
        )
        raise
    finally:
        closed.set()
    if gave_way.is_set() and finish_reason is None:
        raise _GaveWay
    completion = Completion(
        content="".join(parts),
        finish_reason=finish_reason,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
    )
    record_llm_call(
        role=role,
        model=body["model"],
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        ttft_s=ttft,
        latency_s=time.monotonic() - started,
        error=None,
    )
    return completion
