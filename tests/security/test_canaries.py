"""Memory canaries: 20 users each hold a unique fact; no surface shows a user another's.

Each user's canary sits in every kind of thing they own (a memory, a triple, an episode, their
world state, a conversation). Then every user asks the same question through the API, and the
test reads every surface a user (or the LLM, on their behalf) sees: the turn's memory context,
each prompt sent to the LLM, the replies, the dashboard's pushes, the export, the /v1 answer,
the MCP tools, the site's pages and the admin's list pages. A canary found where a user other
than its owner sees it is a leak; the test also checks each user's own canary does reach their
prompt and pages, so "no foreign canary" is not the result of nothing being found at all.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from apps.accounts.services import api_key_create
from apps.chat.models import Conversation, Message
from apps.cognition.context import memory_context_for_turn
from apps.dashboard.routing import websocket_urlpatterns as mind_routes
from apps.memory import browser_services, episode_services, graph_services, world_services
from apps.memory import services as memory_services

pytestmark = pytest.mark.django_db(transaction=True)

USERS = 20
QUESTION = "What is my locker code?"
CANARY = re.compile(r"canary-\d{2}-[a-z]{6}")

# Pages of the site a signed-in user opens without naming an object.
PAGES = [
    "/",
    "/c/",
    "/memory/",
    "/memory/?similar=locker+code",
    "/memory/knowledge",
    "/memory/world",
    "/dashboard/",
    "/accounts/settings/",
]


def _canary(index: int) -> str:
    # Letters only after the number: nothing else in a page looks like one.
    return f"canary-{index:02d}-" + "".join(chr(ord("a") + (index * 7 + k) % 26) for k in range(6))


def _holder(index: int):
    user = get_user_model().objects.create_user(
        f"holder{index:02d}", password="correct-horse-battery-9"
    )
    canary = _canary(index)
    conversation = Conversation.objects.create(owner=user, title=f"Locker {canary}")
    question = Message.objects.create(
        conversation=conversation, role=Message.Role.USER, content=f"My locker code is {canary}."
    )
    Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content=f"I will remember {canary}.",
        reply_to=question,
    )
    memory_services.memory_node_create(
        owner=user, description=f"The user's locker code is {canary}", kind="fact", source="admin"
    )
    graph_services.triple_upsert(
        owner=user, subject=user.username, predicate="has locker code", object=canary
    )
    episode_services.episode_create(
        owner=user, summary=f"The user chose the locker code {canary}", conversation=conversation
    )
    world_services.world_apply(
        user_id=user.pk,
        ops=[{"op": "set", "path": "project", "value": f"Locker {canary}"}],
        source="browser",
    )
    _, secret = api_key_create(user=user, name="canary")
    return user, canary, conversation, secret


class Sightings:
    """Every canary seen, by surface: whose it was and who saw it."""

    def __init__(self, owners: dict[str, object]):
        self.owners = owners
        self.checks: Counter[str] = Counter()
        self.own: Counter[str] = Counter()
        self.foreign: list[tuple[str, str, str]] = []

    def look(self, surface: str, viewer, text: str) -> None:
        self.checks[surface] += 1
        for canary in set(CANARY.findall(text)):
            owner = self.owners.get(canary)
            if owner == viewer:
                self.own[surface] += 1
            else:
                self.foreign.append((surface, viewer.username, canary))


async def _dashboard_pushes(holders) -> dict:
    """What each user's open dashboard is pushed, on connect and while every user adds a
    memory holding their canary: frames by user, until each has shown its own new memory."""
    sockets = {}
    frames = {user: [] for user, *_ in holders}
    for user, *_ in holders:
        communicator = WebsocketCommunicator(URLRouter(mind_routes), "/ws/mind/me/")
        communicator.scope["user"] = user
        connected, _ = await communicator.connect()
        assert connected
        frames[user].append(await communicator.receive_from(10))
        sockets[user] = communicator
    for user, canary, *_ in holders:
        await sync_to_async(browser_services.memory_node_add)(
            owner=user, description=f"Added by hand: {canary}", source="admin"
        )
    async with asyncio.timeout(30):
        for user, canary, *_ in holders:
            while not any(f"Added by hand: {canary}" in frame for frame in frames[user][1:]):
                frames[user].append(await sockets[user].receive_from(30))
    for communicator in sockets.values():
        await communicator.disconnect()
    return frames


async def _mcp_reads(server: str, secret: str) -> str:
    """What every read-only MCP tool answers the user's key."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    answers = []
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=30) as http,
        Client(streamable_http_client(f"{server}/mcp", http_client=http)) as mcp,
    ):
        for tool in (await mcp.list_tools()).tools:
            if tool.annotations and tool.annotations.read_only_hint:
                required = tool.input_schema.get("required", [])
                result = await mcp.call_tool(tool.name, dict.fromkeys(required, "locker code"))
                answers.append(json.dumps(result.model_dump(mode="json"), default=str))
    return "\n".join(answers)


def _admin_list_pages() -> list[str]:
    return [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
    ] + ["/admin/", "/admin/llm-metrics/"]


def test_twenty_users_see_no_canary_but_their_own_on_any_surface(llm_stub, asgi_server):
    holders = [_holder(index) for index in range(USERS)]
    owners = {canary: user for user, canary, _, _ in holders}
    seen = Sightings(owners)

    for user, _, conversation, secret in holders:
        context = memory_context_for_turn(user=user, conversation=conversation, text=QUESTION)
        seen.look("retrieval", user, context.prompt_block)

        asked_from = len(llm_stub.requests)
        api = Client(
            headers={
                "Authorization": f"Bearer {secret}",
                "X-Thalamus-Conversation": str(conversation.pk),
            }
        )
        response = api.post(
            "/v1/chat/completions",
            {"model": "thalamus", "messages": [{"role": "user", "content": QUESTION}]},
            content_type="application/json",
        )
        assert response.status_code == 200, response.content
        seen.look("/v1 answer", user, response.content.decode())
        for request in llm_stub.requests[asked_from:]:
            seen.look("LLM prompts", user, json.dumps(request["body"], ensure_ascii=False))
        reply = Message.objects.filter(conversation=conversation).latest("pk")
        seen.look("replies", user, reply.content + json.dumps(reply.trace, default=str))
        seen.look("/v1 models", user, api.get("/v1/models").content.decode())
        seen.look("MCP tools", user, async_to_sync(_mcp_reads)(asgi_server, secret))

        site = Client()
        site.force_login(user)
        seen.look("export", user, site.get("/memory/export").content.decode())
        for page in [*PAGES, f"/c/{conversation.pk}/"]:
            response = site.get(page)
            assert response.status_code == 200, page
            seen.look("pages", user, response.content.decode())
        for page in _admin_list_pages():
            response = site.get(page, follow=True)
            assert response.redirect_chain, f"{page} let a non-staff user in"
            seen.look("admin list pages", user, response.content.decode())

    for user, pushed in async_to_sync(_dashboard_pushes)(holders).items():
        for frame in pushed:
            seen.look("dashboard pushes", user, frame)

    surfaces = sorted(seen.checks)
    print(
        f"\n{USERS} users x {len(surfaces)} surfaces ({sum(seen.checks.values())} reads): "
        f"{len(seen.foreign)} foreign canaries"
    )
    assert seen.foreign == []
    # Each user's own canary reached what the turn and the pages are built from.
    for surface in ("retrieval", "LLM prompts", "MCP tools", "export", "pages", "dashboard pushes"):
        assert seen.own[surface] >= USERS, (surface, seen.own[surface])
