"""Two users: whatever route, method or credential user B uses with user A's ids, B gets a 404
(or 403, or the admin's login page) and never A's data; A's objects are left as they were.

The matrix is generated from the URL patterns: every route whose pattern takes an object id is
checked, so a new route is checked as soon as it exists (and fails here until its id is given
a kind in `_object_id`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import get_resolver

from apps.accounts.models import ApiKey
from apps.accounts.services import api_key_create
from apps.chat.models import Conversation, Message
from apps.memory import episode_services, graph_services, world_services
from apps.memory import services as memory_services
from apps.memory.models import Episode, MemoryNode, Triple, WorldState
from tests.route_coverage import _routes

SECRET = "Zanzibar-7731-alice-only"

ID_NAMES = {
    "pk",
    "node_id",
    "message_id",
    "user_id",
    "object_id",
    "content_type_id",
    "id",
    "conversation_id",
}
_PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)")


@dataclass
class Owned:
    """User A's objects of every kind, each carrying SECRET."""

    user: object
    conversation: Conversation
    question: Message
    reply: Message
    node: MemoryNode
    episode: Episode
    triple: Triple
    world: WorldState
    api_key: ApiKey


def owned_by(user) -> Owned:
    conversation = Conversation.objects.create(owner=user, title=f"Trip to {SECRET}")
    question = Message.objects.create(
        conversation=conversation, role=Message.Role.USER, content=f"My code is {SECRET}"
    )
    reply = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content=f"Noted: {SECRET}",
        reply_to=question,
    )
    node = memory_services.memory_node_create(
        owner=user, description=f"Alice's locker code is {SECRET}", embed=False, source="admin"
    )
    episode = episode_services.episode_create(
        owner=user, summary=f"Alice planned {SECRET}", conversation=conversation
    )
    triple = graph_services.triple_upsert(
        owner=user, subject="Alice", predicate="has locker code", object=SECRET
    )
    world_services.world_apply(
        user_id=user.pk,
        ops=[{"op": "set", "path": "project", "value": f"Project {SECRET}"}],
        source="browser",
    )
    key, _ = api_key_create(user=user, name=f"key {SECRET}")
    return Owned(
        user=user,
        conversation=conversation,
        question=question,
        reply=reply,
        node=node,
        episode=episode,
        triple=triple,
        world=WorldState.objects.get(owner=user),
        api_key=key,
    )


def _parameters(route: str) -> list[str]:
    return [a or b for a, b in _PARAMETER.findall(route)]


def _object_id(route: str, name: str, a: Owned) -> str:
    """A's id of the kind this route's parameter names."""
    if name in ("pk", "conversation_id") and route.startswith(("c/", "ws/c/")):
        return str(a.conversation.pk)
    if name == "pk" and route.startswith(("memory/", "dashboard/node/")) or name == "node_id":
        return str(a.node.pk)
    if name == "message_id":
        return str(a.reply.pk)
    if name == "pk" and route.startswith("accounts/settings/keys/"):
        return str(a.api_key.pk)
    if name in ("user_id", "id", "who"):
        return str(a.user.pk)
    if name == "content_type_id":
        return str(ContentType.objects.get_for_model(MemoryNode).pk)
    if name == "object_id":
        model = route.split("/")[2]
        by_model = {
            "memorynode": a.node,
            "episode": a.episode,
            "triple": a.triple,
            "worldstate": a.world,
            "apikey": a.api_key,
            "user": a.user,
        }
        return str(by_model.get(model, a.node).pk)
    if name == "index":
        # A reply's proposal by its place in the reply's list: the conversation decides whose.
        return "0"
    if name == "app_label":
        return "memory"
    if name == "url":
        return f"memory/memorynode/{a.node.pk}/change/"
    raise LookupError(f"{route}: no object kind for its parameter {name!r}; add it here")


def _url(route: str, a: Owned) -> str:
    def fill(match: re.Match) -> str:
        return _object_id(route, match.group(1) or match.group(2), a)

    return "/" + _PARAMETER.sub(fill, route).removeprefix("^").removesuffix("$")


def _routes_with_ids(patterns) -> list[str]:
    return sorted(route for route, _ in _routes(patterns) if ID_NAMES & set(_parameters(route)))


HTTP_ROUTES = _routes_with_ids(get_resolver().url_patterns)


def _ws_routes() -> list[str]:
    from thalamus_site.routing import websocket_urlpatterns

    return sorted(
        route
        for route, _ in _routes(websocket_urlpatterns)
        if {*ID_NAMES, "who"} & set(_parameters(route))
    )


WS_ROUTES = _ws_routes()


@pytest.fixture
def a(user) -> Owned:
    return owned_by(user)


@pytest.fixture
def b_session(other_user) -> Client:
    client = Client()
    client.force_login(other_user)
    return client


def _body(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


def _post_data(a: Owned) -> dict:
    # Every field a view reads an id or a text from, holding A's ids.
    return {
        "message_id": a.reply.pk,
        "ids": [a.node.pk],
        "triples": [a.triple.pk],
        "episodes": [a.episode.pk],
        "title": "taken",
        "content": "taken",
        "description": "taken",
        "kind": "fact",
        "importance": "0.5",
        "confirm": "on",
    }


def _assert_untouched(a: Owned) -> None:
    conversation = Conversation.objects.get(pk=a.conversation.pk)
    assert conversation.title == f"Trip to {SECRET}"
    assert list(conversation.messages.values_list("pk", flat=True).order_by("pk")) == [
        a.question.pk,
        a.reply.pk,
    ]
    assert Message.objects.get(pk=a.reply.pk).content == f"Noted: {SECRET}"
    node = MemoryNode.objects.get(pk=a.node.pk)
    assert node.description == f"Alice's locker code is {SECRET}" and node.valid_to is None
    assert node.confidence_score == a.node.confidence_score
    assert Episode.objects.filter(pk=a.episode.pk).exists()
    assert Triple.objects.filter(pk=a.triple.pk).exists()
    assert WorldState.objects.get(owner=a.user).version == a.world.version
    assert ApiKey.objects.get(pk=a.api_key.pk).revoked_at is None


def test_the_matrix_covers_every_kind_of_object():
    # If a route disappears from the list, its kind is no longer checked: say so here.
    assert {"c/<int:pk>/", "memory/<int:pk>/edit", "dashboard/node/<int:pk>/"} <= set(HTTP_ROUTES)
    assert "ws/c/<int:conversation_id>/" in WS_ROUTES


def _check_refused(client: Client, route: str, a: Owned, *, headers: dict) -> set[int]:
    """GET and POST on the route with A's ids: never A's data, and the refusal expected."""
    url = _url(route, a)
    statuses = set()
    for method in ("get", "post"):
        if method == "post":
            response = client.post(url, _post_data(a), headers=headers)
        else:
            response = client.get(url, headers=headers)
        statuses.add(response.status_code)
        where = f"{method.upper()} {url} {headers}"
        assert SECRET not in _body(response), f"{where} showed A's data"
        if response.status_code == 302:
            login = response["Location"].split("?")[0]
            assert login in ("/accounts/login/", "/admin/login/"), where
        elif route.startswith("admin/"):
            raise AssertionError(f"{where}: the admin answered {response.status_code}")
        else:
            assert response.status_code in (401, 403, 404, 405), where
    return statuses


SITE_ROUTES = [route for route in HTTP_ROUTES if not route.startswith("admin/")]
ADMIN_ROUTES = [route for route in HTTP_ROUTES if route.startswith("admin/")]


@pytest.mark.django_db
@pytest.mark.parametrize("route", SITE_ROUTES)
def test_another_users_ids_get_a_404_and_none_of_their_data(route, a, b_session, other_user):
    for headers in ({}, {"HX-Request": "true"}):
        statuses = _check_refused(b_session, route, a, headers=headers)
        assert statuses & {403, 404}, f"{route}: no method reached the view's own check"
        assert 302 not in statuses
    # Keys open /v1 only: on the site's pages a key is no login, not even B's own.
    _, secret = api_key_create(user=other_user, name="b")
    statuses = _check_refused(
        Client(),
        route,
        a,
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert statuses <= {302, 401, 403, 405}
    _assert_untouched(a)


@pytest.mark.django_db
def test_every_admin_page_on_another_users_ids_sends_a_non_staff_user_to_its_login(
    a, b_session, other_user
):
    _, secret = api_key_create(user=other_user, name="b")
    for route in ADMIN_ROUTES:
        for client, headers in (
            (b_session, {}),
            (Client(), {"Authorization": f"Bearer {secret}"}),
        ):
            assert _check_refused(client, route, a, headers=headers) == {302}
    _assert_untouched(a)


# The API checks the key on a pool thread, which sees only committed rows.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stream", [False, True])
def test_the_api_refuses_another_users_conversation_with_a_404(stream, a, other_user, llm_stub):
    _, secret = api_key_create(user=other_user, name="b")
    client = Client(
        headers={
            "Authorization": f"Bearer {secret}",
            "X-Thalamus-Conversation": str(a.conversation.pk),
        }
    )
    response = client.post(
        "/v1/chat/completions",
        {"model": "thalamus", "messages": [{"role": "user", "content": "what is my code?"}]}
        | ({"stream": True} if stream else {}),
        content_type="application/json",
    )
    assert response.status_code == 404
    assert SECRET not in _body(response)
    assert llm_stub.requests == []
    _assert_untouched(a)


# Routes that take A's ids in the body or the query rather than the path.
BODY_ID_REQUESTS = [
    ("post", "/memory/forget", lambda a: {"ids": [a.node.pk]}),
    ("post", "/memory/knowledge/forget", lambda a: {"triples": [a.triple.pk]}),
    ("post", "/memory/knowledge/forget", lambda a: {"episodes": [a.episode.pk]}),
    ("get", "/dashboard/switch", lambda a: {"who": a.user.pk}),
    ("get", "/memory/", lambda a: {"similar": "locker code", "q": "locker"}),
    ("get", "/memory/knowledge", lambda a: {"q": "locker"}),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "url", "data"), BODY_ID_REQUESTS)
def test_another_users_ids_in_the_body_change_nothing_of_theirs(method, url, data, a, b_session):
    response = getattr(b_session, method)(url, data(a))
    assert SECRET not in _body(response)
    assert response.status_code in (200, 302, 404)
    _assert_untouched(a)


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["retry", "continue"])
def test_another_users_reply_id_in_my_conversation_is_a_404(action, a, other_user, b_session):
    mine = Conversation.objects.create(owner=other_user)
    response = b_session.post(f"/c/{mine.pk}/{action}", {"message_id": a.reply.pk})
    assert response.status_code == 404 and SECRET not in _body(response)
    _assert_untouched(a)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("route", WS_ROUTES)
async def test_a_socket_on_another_users_id_is_refused(route, user, other_user):
    from asgiref.sync import sync_to_async
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from thalamus_site.routing import websocket_urlpatterns

    a = await sync_to_async(owned_by)(user)
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), _url(route, a))
    communicator.scope["user"] = other_user
    connected, code = await communicator.connect()
    assert not connected and code == 4404


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("route", WS_ROUTES)
async def test_a_socket_opened_from_another_origin_is_refused(route, user):
    from asgiref.sync import sync_to_async
    from channels.testing import WebsocketCommunicator

    from thalamus_site.asgi import application

    a = await sync_to_async(owned_by)(user)
    client = Client()
    await sync_to_async(client.force_login)(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def opened_from(origin: bytes) -> bool:
        communicator = WebsocketCommunicator(
            application,
            _url(route, a),
            headers=[(b"origin", origin), (b"cookie", cookie), (b"host", b"testserver")],
        )
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return connected

    assert await opened_from(b"http://testserver"), "A's own page connects"
    assert not await opened_from(b"https://evil.example")
    assert not await opened_from(b"null")


@pytest.mark.django_db(transaction=True)
async def test_every_mcp_tool_on_another_users_ids_shows_and_changes_nothing_of_theirs(
    asgi_server, user, other_user
):
    """Generated from the tools the server lists: an id argument gets A's memory's id, a text
    one words of A's memory, so a new tool is checked as it appears."""
    import httpx2
    from asgiref.sync import sync_to_async
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    a = await sync_to_async(owned_by)(user)
    _, secret = await sync_to_async(api_key_create)(user=other_user, name="b")
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=30) as http,
        Client(streamable_http_client(f"{asgi_server}/mcp", http_client=http)) as mcp,
    ):
        tools = (await mcp.list_tools()).tools
        assert {tool.name for tool in tools} >= {"forget_memory", "search_memories"}
        for tool in tools:
            arguments = {}
            for name, schema in tool.input_schema.get("properties", {}).items():
                if schema.get("type") == "integer" and name.endswith("_id"):
                    arguments[name] = a.node.pk
                elif schema.get("type") == "string":
                    arguments[name] = "locker code"
            result = await mcp.call_tool(tool.name, arguments)
            shown = json.dumps(result.model_dump(mode="json"), default=str)
            assert SECRET not in shown, tool.name
            if any(name.endswith("_id") for name in arguments):
                assert result.is_error, f"{tool.name} accepted A's id"
    await sync_to_async(_assert_untouched)(a)
