"""The one way to build an OpenAI-compatible client for the configured LLM endpoint.

Clients are cached: a new one per call would open a new connection pool every turn, which
costs more than the whole of Thalamus's own work on the hot path.
"""

from __future__ import annotations

import asyncio
from functools import lru_cache

from django.conf import settings
from openai import AsyncOpenAI, AsyncStream, OpenAI


@lru_cache(maxsize=16)
def _sync_client(base_url: str, api_key: str, timeout: float, max_retries: int) -> OpenAI:
    return OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)


_async_clients: dict[tuple, AsyncOpenAI] = {}


def llm_client(*, timeout: float = 60.0, max_retries: int = 0, base_url: str | None = None):
    return _sync_client(
        base_url or settings.THALAMUS_LLM_BASE_URL,
        settings.THALAMUS_LLM_API_KEY,
        float(timeout),
        max_retries,
    )


def async_llm_client(*, timeout: float = 60.0, max_retries: int = 0, base_url: str | None = None):
    # An async client's connection pool belongs to the event loop that first used it.
    key = (
        id(asyncio.get_running_loop()),
        base_url or settings.THALAMUS_LLM_BASE_URL,
        settings.THALAMUS_LLM_API_KEY,
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
