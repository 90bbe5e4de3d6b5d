"""The one way to build an OpenAI-compatible client for the configured LLM endpoint."""

from __future__ import annotations

from django.conf import settings
from openai import AsyncOpenAI, OpenAI


def llm_client(*, timeout: float = 60.0, max_retries: int = 0, base_url: str | None = None):
    return OpenAI(
        base_url=base_url or settings.THALAMUS_LLM_BASE_URL,
        api_key=settings.THALAMUS_LLM_API_KEY,
        timeout=timeout,
        max_retries=max_retries,
    )


def async_llm_client(*, timeout: float = 60.0, max_retries: int = 0, base_url: str | None = None):
    return AsyncOpenAI(
        base_url=base_url or settings.THALAMUS_LLM_BASE_URL,
        api_key=settings.THALAMUS_LLM_API_KEY,
        timeout=timeout,
        max_retries=max_retries,
    )
