"""Thalamus's memory over the Model Context Protocol (streamable HTTP at /mcp).

Any MCP client (Claude Desktop, Cursor, an agent framework) can search, add to, list and forget
the memories of the user whose API key it sends, and read what Thalamus knows about them. Every
tool reads and writes that user's own rows only: the global memories and facts every user shares
(Thalamus's persona and rules) are not theirs and are left out.

The transport is stateless and answers in JSON: any web process can serve any request, with no
session to keep. The tools are async and reach the ORM through `on_pool_thread`
(apps/core/db.py), like the consumers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from django.conf import settings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field
from starlette.types import ASGIApp

from apps.accounts.selectors import user_knowledge_language
from apps.core.db import on_pool_thread
from apps.language.text import visible
from apps.mcp_server.auth import ApiKeyAuth, current_user
from apps.memory import browser_selectors, browser_services
from apps.memory.embedding import EmbeddingError, get_embedder
from apps.memory.models import MemoryNode
from apps.memory.renderer import render_knowledge, render_world
from apps.memory.search_selectors import EMBED_TIMEOUT_SECONDS, memory_search
from apps.memory.selectors import shared_memory_count, world_state_for
from apps.memory.services import memory_nodes_mark_accessed

MCP_PATH = "/mcp"
MAX_FACT_CHARS = 2000
PROFILE_TRIPLES = 200

mcp = MCPServer(
    "Thalamus",
    instructions=(
        "The long-term memory of one Thalamus user: what they told Thalamus, what it learnt from "
        "their conversations, and a profile of what it knows about them. Search it before "
        "answering questions about the user; remember facts they state about themselves."
    ),
)


class Memory(BaseModel):
    id: int
    text: str
    kind: str
    topic: str
    source: str = Field(description="user (their own words), inferred, admin, imported or agent")
    created_at: datetime


class FoundMemory(BaseModel):
    id: int
    text: str
    kind: str
    topic: str
    created_at: datetime
    score: float = Field(description="0..1, how well it matches the query")


class Found(BaseModel):
    memories: list[FoundMemory]


class Recent(BaseModel):
    memories: list[Memory]


class Remembered(BaseModel):
    memory: Memory
    already_known: bool = Field(description="an equivalent memory was held already")
    awaiting_approval: bool = Field(
        description="it reads as an instruction to the assistant, so it is held until the user "
        "approves it in the memory browser"
    )


class Forgotten(BaseModel):
    memory_id: int
    receipt: str


def _memory(node: MemoryNode) -> Memory:
    return Memory(
        id=node.pk,
        text=node.description,
        kind=node.kind,
        topic=node.topic,
        source=node.source,
        created_at=node.created_at,
    )


def _query_vector(text: str) -> list[float] | None:
    """The text's embedding; None when the embedder is down (search is by words then)."""
    try:
        return get_embedder(timeout=EMBED_TIMEOUT_SECONDS).embed([text])[0]
    except EmbeddingError:
        return None


def _search(user, query: str, limit: int) -> Found:
    # Global memories may take places among the hits; ask for that many more, then drop them.
    hits = memory_search(
        user_id=user.pk,
        text=query,
        vector=_query_vector(query),
        limit=limit + shared_memory_count(),
    )
    own = [hit for hit in hits if not hit.is_global][:limit]
    memory_nodes_mark_accessed(node_ids=[hit.id for hit in own])
    return Found(
        memories=[
            FoundMemory(
                id=hit.id,
                text=hit.description,
                kind=hit.kind,
                topic=hit.topic,
                created_at=hit.created_at,
                score=round(hit.score, 4),
            )
            for hit in own
        ]
    )


def _remember(user, fact: str) -> Remembered:
    fact = visible(fact).strip()
    if not fact:
        raise ToolError("The fact is empty.")
    vector = _query_vector(fact)
    # The write service confirms a memory already held that says the same (`restated`) and
    # holds what reads as an instruction (apps.memory.quarantine).
    node = browser_services.memory_node_add(
        owner=user,
        description=fact,
        # Another agent's words about the user, not the user's: data (apps.memory.provenance).
        source=MemoryNode.Source.AGENT,
        # Embedded once: a fact the embedder could not take now is embedded after commit.
        vector=vector,
        embed=False,
    )
    held = node.state == MemoryNode.State.QUARANTINED
    known = getattr(node, "restated", False)
    return Remembered(memory=_memory(node), already_known=known, awaiting_approval=held)


def _forget(user, memory_id: int) -> Forgotten:
    node = browser_selectors.memory_node_for_user(user=user, pk=memory_id)
    if node is None:
        raise ToolError(f"You have no memory {memory_id}.")
    receipt = browser_services.memory_nodes_forget(node_ids=[node.pk])
    return Forgotten(memory_id=memory_id, receipt=receipt.sentence)


def _recent(user, limit: int) -> Recent:
    nodes = browser_selectors.memories_for_browser(user=user, filters=None)[:limit]
    return Recent(memories=[_memory(node) for node in nodes])


def _profile(user) -> str:
    language = user_knowledge_language(user=user)
    triples = browser_selectors.triples_for_user(user=user)[:PROFILE_TRIPLES]
    sections = [
        render_knowledge(triples=triples, language=language, user=user),
        render_world(world_state_for(user_id=user.pk), language=language),
    ]
    return "\n\n".join(section for section in sections if section) or (
        "Thalamus knows nothing about you yet."
    )


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
async def search_memories(
    query: Annotated[str, Field(min_length=1, max_length=500, description="What to look for")],
    limit: Annotated[int, Field(ge=1, le=50, description="At most this many memories")] = 10,
) -> Found:
    """Search your memories by meaning and words, best match first."""
    return await on_pool_thread(_search)(current_user.get(), query, limit)


@mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
async def remember(
    fact: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_FACT_CHARS,
            description="A fact about you, in your own words",
        ),
    ],
) -> Remembered:
    """Remember a fact about you, as said by you; an equivalent memory is not stored twice."""
    return await on_pool_thread(_remember)(current_user.get(), fact)


@mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
async def forget_memory(memory_id: int) -> Forgotten:
    """Forget one of your memories, with its earlier versions and what quotes it."""
    return await on_pool_thread(_forget)(current_user.get(), memory_id)


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
async def recent_memories(
    limit: Annotated[int, Field(ge=1, le=100, description="At most this many memories")] = 20,
) -> Recent:
    """Your newest memories, newest first."""
    return await on_pool_thread(_recent)(current_user.get(), limit)


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
async def profile() -> str:
    """What Thalamus knows about you (its knowledge block) and your current world state."""
    return await on_pool_thread(_profile)(current_user.get())


def mcp_asgi_app() -> ASGIApp:
    """The MCP endpoint as an ASGI app, behind the API key check; its lifespan runs the SDK's
    session manager, so the server must be started with lifespan on."""
    app = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        # The site's cap on request bodies (THALAMUS_MAX_BODY_BYTES); larger ones get 413.
        max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
        # ApiKeyAuth checks the Host against ALLOWED_HOSTS, as Django does for the rest.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return ApiKeyAuth(app)
