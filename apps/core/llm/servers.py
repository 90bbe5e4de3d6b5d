"""What the LLM servers say of themselves: which server it is, the model's context window, the
models it lists, and the key each endpoint is sent.

A local server has a fixed context window (4,096 tokens is common). llama.cpp refuses a longer
prompt with HTTP 400; Ollama silently drops the start of it, which is where the system prompt
with the user's memories sits. So the window is read from the server where it tells: llama.cpp
`GET /props`, vLLM's `max_model_len` in `/v1/models`; otherwise the runtime setting.

Ollama's `/v1` ignores a request's num_ctx: it runs the model with the Modelfile's num_ctx
(`POST /api/show`), else with its own default (OLLAMA_CONTEXT_LENGTH, or one it picks from the
GPU's memory), which it tells only for a loaded model (`GET /api/ps`). Before the model is
loaded, the operator's THALAMUS_OLLAMA_CONTEXT_LENGTH stands for it (4,096, Ollama's default
on a small GPU), within the length the model was trained on.

How many requests it generates at once is read the same way: llama.cpp's `/props` says
`total_slots`; Ollama does not say its OLLAMA_NUM_PARALLEL, so the operator's
THALAMUS_OLLAMA_NUM_PARALLEL stands for it; any other server counts as one.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.cache import cache

from apps.core.selectors import cached_value

if TYPE_CHECKING:
    # Imported where used: its import (~0.25 s of CPU) delayed every process's start (`up`'s).
    import httpx

logger = logging.getLogger(__name__)

PROBE_SECONDS = 2.0
LIMITS_SECONDS = 600
GUESSED_SECONDS = 60
OLLAMA_DEFAULT_SOURCE = "THALAMUS_OLLAMA_CONTEXT_LENGTH (Ollama has not loaded the model)"
# How long the models a server lists are believed; a server that could not be asked is asked
# again sooner.
MODELS_SECONDS = 180
MODELS_UNKNOWN_SECONDS = 15


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    model: str

    @property
    def key(self) -> str:
        return hashlib.sha1(f"{self.base_url}|{self.model}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ServerFacts:
    """What a server said about a model; `context` None when it said nothing. `slots`: the
    requests it generates at once (`priority` lets background calls use the spare ones)."""

    server: str  # "llama.cpp", "ollama", "vllm" or "unknown"
    context: int | None
    source: str
    slots: int = 1


def facts_key(endpoint: Endpoint) -> str:
    return f"llm:facts:{endpoint.key}"


def server_facts(endpoint: Endpoint, *, cached: Mapping | None = None) -> ServerFacts:
    """The server's own word on the model's window, asked once every ten minutes (every minute
    while Ollama has not loaded the model, so the window it loads it with is soon known)."""
    known = cached_value(facts_key(endpoint), cached)
    if known is not None:
        return ServerFacts(**known)
    facts = _probe(endpoint)
    seconds = GUESSED_SECONDS if facts.source == OLLAMA_DEFAULT_SOURCE else LIMITS_SECONDS
    cache.set(facts_key(endpoint), asdict(facts), seconds)
    return facts


# would take OPENAI_API_KEY from the environment for an empty one).
NO_API_KEY = "none"


def endpoint_api_key(base_url: str) -> str:
    """The key sent to `base_url`: the environment's THALAMUS_LLM_API_KEY only to the base URLs
    the environment names (THALAMUS_LLM_BASE_URL, THALAMUS_EMBED_BASE_URL); to an endpoint chosen
    in the admin, the key the operator set for it in THALAMUS_LLM_ENDPOINT_KEYS, else
    NO_API_KEY."""
    url = base_url.rstrip("/")
    from_env = {
        settings.THALAMUS_LLM_BASE_URL.rstrip("/"),
        settings.THALAMUS_EMBED_BASE_URL.rstrip("/"),
    }
    if url in from_env - {""}:
        return settings.THALAMUS_LLM_API_KEY
    return settings.THALAMUS_LLM_ENDPOINT_KEYS.get(url, NO_API_KEY)


def _auth_headers(base_url: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {endpoint_api_key(base_url)}"}


def server_root(base_url: str) -> str:
    """http://host:port/v1 -> http://host:port: llama.cpp and Ollama's own routes sit there."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def _probe(endpoint: Endpoint) -> ServerFacts:
    import httpx

    root = server_root(endpoint.base_url)
    headers = _auth_headers(endpoint.base_url)
    try:
        with httpx.Client(timeout=PROBE_SECONDS, headers=headers) as client:
            return (
                _llama_cpp_facts(client, root)
                or _ollama_facts(client, root, endpoint.model)
                or _listed_facts(client, endpoint)
                or ServerFacts("unknown", None, "runtime setting")
            )
    except (httpx.HTTPError, ValueError) as exc:
        logger.info("could not ask %s about its limits: %s", endpoint.base_url, exc)
        return ServerFacts("unknown", None, "runtime setting")


def _json_or_none(response: httpx.Response):
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _positive_int(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value > 0:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip()) or None
    return None


def _llama_cpp_facts(client: httpx.Client, root: str) -> ServerFacts | None:
    body = _json_or_none(client.get(f"{root}/props"))
    if not isinstance(body, dict):
        return None
    settings_ = body.get("default_generation_settings")
    n_ctx = _positive_int(settings_.get("n_ctx")) if isinstance(settings_, dict) else None
    if n_ctx is None:
        return None
    slots = _positive_int(body.get("total_slots")) or 1
    return ServerFacts("llama.cpp", n_ctx, "llama.cpp /props", slots)


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def _ollama_facts(client: httpx.Client, root: str, model: str) -> ServerFacts | None:
    body = _json_or_none(client.post(f"{root}/api/show", json={"model": model}))
    if not isinstance(body, dict) or not ({"model_info", "parameters", "details"} & set(body)):
        return None
    slots = settings.THALAMUS_OLLAMA_NUM_PARALLEL
    parameters = body.get("parameters")
    match = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    if match:
        return ServerFacts("ollama", int(match.group(1)), "Ollama /api/show num_ctx", slots)
    # Ollama's /v1 takes no num_ctx: without one in the Modelfile, the model runs with the
    # server's default window, which /api/ps tells once the model is loaded.
    loaded = _ollama_loaded_context(client, root, model)
    if loaded:
        return ServerFacts("ollama", loaded, "Ollama /api/ps context_length", slots)
    info = body.get("model_info")
    trained = None
    if isinstance(info, dict):
        trained = next(
            (
                _positive_int(value)
                for key, value in info.items()
                if key.endswith(".context_length")
            ),
            None,
        )
    context = settings.THALAMUS_OLLAMA_CONTEXT_LENGTH
    return ServerFacts("ollama", min(context, trained or context), OLLAMA_DEFAULT_SOURCE, slots)


def _ollama_loaded_context(client: httpx.Client, root: str, model: str) -> int | None:
    body = _json_or_none(client.get(f"{root}/api/ps"))
    running = body.get("models") if isinstance(body, dict) else None
    for entry in running if isinstance(running, list) else []:
        if isinstance(entry, dict) and model_listed(model, [entry.get("model"), entry.get("name")]):
            return _positive_int(entry.get("context_length"))
    return None


def _listed_facts(client: httpx.Client, endpoint: Endpoint) -> ServerFacts | None:
    body = _json_or_none(client.get(f"{endpoint.base_url.rstrip('/')}/models"))
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    for entry in data:
        if isinstance(entry, dict) and entry.get("id") == endpoint.model:
            length = _positive_int(entry.get("max_model_len"))
            if length:
                return ServerFacts("vllm", length, "/v1/models max_model_len")
    return None


# ----------------------------------------------------------------------------- listed models


def models_key(base_url: str) -> str:
    return f"llm:models:{hashlib.sha1(base_url.encode()).hexdigest()[:16]}"


def endpoint_models(base_url: str) -> list[str] | None:
    """The models the server at `base_url` lists (GET /models); None when it cannot be asked."""
    key = models_key(base_url)
    cached = cache.get(key)
    if cached is not None:
        return cached["models"]
    models = _list_models(base_url)
    cache.set(
        key, {"models": models}, MODELS_SECONDS if models is not None else MODELS_UNKNOWN_SECONDS
    )
    return models


def _list_models(base_url: str) -> list[str] | None:
    import httpx

    headers = _auth_headers(base_url)
    try:
        response = httpx.get(
            f"{base_url.rstrip('/')}/models", headers=headers, timeout=PROBE_SECONDS
        )
    except httpx.HTTPError as exc:
        logger.info("could not ask %s for its models: %s", base_url, exc)
        return None
    body = _json_or_none(response)
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    return [
        entry["id"]
        for entry in data
        if isinstance(entry, dict) and isinstance(entry.get("id"), str)
    ]


def model_listed(model: str, models: list[str]) -> bool:
    # Ollama runs "qwen2.5" as "qwen2.5:latest", and lists it so.
    return model in models or (":" not in model and f"{model}:latest" in models)
