"""The models a conversation may be answered by: the chat model picker's choices.

What the chat's server lists (cached by `endpoint_models`), less the embedding model and any
model named like one, within the admin's `allowed_chat_models`; the configured chat model is
always among them, and alone when the server cannot be asked.
"""

from __future__ import annotations

import re

from apps.core.llm.limits import CHAT, EMBEDDING, role_endpoint
from apps.core.llm.servers import endpoint_models
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config

# Servers list their embedding and reranking models beside the chat ones; none can answer.
EMBEDDING_NAME = re.compile(
    r"embed|rerank|(^|[/:_.-])(bge|e5|gte|minilm)([/:_.-]|$)", re.IGNORECASE
)


def allowed_chat_models(config: RuntimeConfig) -> set[str]:
    return {line.strip() for line in config.allowed_chat_models.splitlines() if line.strip()}


def listed_chat_models(config: RuntimeConfig | None = None) -> list[str] | None:
    """The chat models the chat's server lists, within what the admin allows; None when the
    server cannot be asked."""
    config = config or runtime_config()
    listed = endpoint_models(role_endpoint(CHAT, config).base_url)
    if listed is None:
        return None
    embedding = role_endpoint(EMBEDDING, config).model
    allowed = allowed_chat_models(config)
    return [
        name
        for name in listed
        if name != embedding
        and not EMBEDDING_NAME.search(name)
        and (not allowed or name in allowed)
    ]


def chat_models(config: RuntimeConfig | None = None) -> list[str]:
    """The picker's choices: the configured chat model first, then the other listed ones."""
    config = config or runtime_config()
    configured = role_endpoint(CHAT, config).model
    others = [name for name in listed_chat_models(config) or [] if name != configured]
    return [configured, *others]


def picked_chat_model(picked: str, config: RuntimeConfig | None = None) -> str | None:
    """The model a conversation's pick answers with: the pick while it is still offered, else
    None (the configured model answers: the server is down, or the admin took it away)."""
    config = config or runtime_config()
    if not picked or picked == role_endpoint(CHAT, config).model:
        return None
    return picked if picked in chat_models(config) else None
