"""A user's open sockets, chat and dashboard, close within 5 s of a logout, a password change
or an API key's revocation; after a logout or a password change they cannot reopen."""

from __future__ import annotations

import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from apps.accounts.services import api_key_create
from apps.chat.models import Conversation

pytestmark = pytest.mark.django_db(transaction=True)

CLOSE_WITHIN_SECONDS = 5.0
NEW_PASSWORD = "another-horse-battery-42"


def _session_cookie(client: Client) -> bytes:
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _open(path: str, cookie: bytes) -> tuple[WebsocketCommunicator, bool]:
    from thalamus_site.asgi import application

    communicator = WebsocketCommunicator(
        application,
        path,
        headers=[(b"origin", b"http://testserver"), (b"cookie", cookie), (b"host", b"testserver")],
    )
    connected, _ = await communicator.connect()
    return communicator, connected


async def _closed_after(communicator: WebsocketCommunicator, since: float) -> float:
    """Seconds from `since` until the server closed the socket (frames before it skipped)."""
    deadline = since + CLOSE_WITHIN_SECONDS
    while True:
        message = await communicator.receive_output(timeout=max(deadline - time.monotonic(), 0.01))
        if message["type"] == "websocket.close":
            assert message["code"] == 4401
            return time.monotonic() - since


def _logout(user, client: Client) -> None:
    assert client.post("/accounts/logout/").status_code == 302


def _change_password(user, client: Client) -> None:
    # Through the admin's form for another user's password, as an operator would.
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("root", "", "root-horse-battery-77")
    operator = Client()
    operator.force_login(admin)
    response = operator.post(
        f"/admin/auth/user/{user.pk}/password/",
        {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]


def _revoke_key(user, client: Client) -> None:
    key, _ = api_key_create(user=user, name="laptop")
    assert client.post(f"/accounts/settings/keys/{key.pk}/revoke/").status_code == 302


ENDINGS = {"logout": _logout, "password change": _change_password, "key revocation": _revoke_key}


@pytest.mark.parametrize("ending", ENDINGS)
async def test_every_open_socket_closes_within_5_seconds_when_the_sign_in_ends(ending, user):
    conversation = await Conversation.objects.acreate(owner=user)
    client = Client()
    await sync_to_async(client.force_login)(user)
    cookie = _session_cookie(client)
    paths = [f"/ws/c/{conversation.pk}/", "/ws/mind/me/"]
    sockets = []
    for path in paths:
        communicator, connected = await _open(path, cookie)
        assert connected, path
        sockets.append(communicator)

    started = time.monotonic()
    await sync_to_async(ENDINGS[ending])(user, client)
    for communicator in sockets:
        assert await _closed_after(communicator, started) < CLOSE_WITHIN_SECONDS

    for path in paths:
        communicator, connected = await _open(path, cookie)
        # A revoked key leaves the session valid: the page may reconnect. The others end it.
        assert connected == (ending == "key revocation"), path
        await communicator.disconnect()


async def test_another_users_sign_out_leaves_my_sockets_open(user, other_user):
    conversation = await Conversation.objects.acreate(owner=user)
    mine = Client()
    await sync_to_async(mine.force_login)(user)
    communicator, connected = await _open(f"/ws/c/{conversation.pk}/", _session_cookie(mine))
    assert connected
    theirs = Client()
    await sync_to_async(theirs.force_login)(other_user)
    await sync_to_async(_logout)(other_user, theirs)
    assert await communicator.receive_nothing(timeout=1)
    await communicator.disconnect()
