"""Who is calling /mcp: the owner of the API key sent as `Authorization: Bearer <key>`.

The key is checked before the MCP app sees the request, by the same selector and the same
throttle of wrong keys as the OpenAI-compatible API; a request without a valid key gets 401 and
no tool runs. The tools read the owner from `current_user`, set for this request only: the
transport is stateless, so the server task that runs a request's tools is started from the
request and carries its context (a session kept across requests would carry the first one's).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.http.request import split_domain_port, validate_host
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from apps.accounts.selectors import api_key_for_token
from apps.accounts.services import api_key_mark_used
from apps.accounts.throttle import bad_api_key_record, bad_api_key_wait
from apps.core.db import on_pool_thread

current_user: ContextVar[AbstractBaseUser] = ContextVar("mcp_current_user")

_CHALLENGE = 'Bearer realm="Thalamus"'


@dataclass(frozen=True)
class Refusal:
    status: int
    error: str
    description: str
    headers: dict[str, str] = field(default_factory=dict)

    def response(self) -> JSONResponse:
        return JSONResponse(
            {"error": self.error, "error_description": self.description},
            status_code=self.status,
            headers=self.headers,
        )


def api_key_owner(*, authorization: str, address: str) -> AbstractBaseUser | Refusal:
    """The user whose live API key `authorization` carries, or why not."""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return Refusal(
            401,
            "invalid_request",
            "Missing API key: send `Authorization: Bearer <key>`; create a key on your "
            "Thalamus settings page.",
            {"WWW-Authenticate": _CHALLENGE},
        )
    wait = bad_api_key_wait(address=address)
    if wait:
        return Refusal(
            429,
            "too_many_wrong_keys",
            f"Too many wrong API keys from this address. Try again in {wait} seconds.",
            {"Retry-After": str(wait)},
        )
    key = api_key_for_token(token=token)
    if key is None:
        bad_api_key_record(address=address)
        return Refusal(
            401,
            "invalid_token",
            "Invalid or revoked API key.",
            {"WWW-Authenticate": f'{_CHALLENGE}, error="invalid_token"'},
        )
    api_key_mark_used(key=key)
    return key.user


def _host_allowed(host: str) -> bool:
    """Django's ALLOWED_HOSTS rule, which the rest of the site answers by (the SDK's own check
    knows only localhost)."""
    domain, _ = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)


class ApiKeyAuth:
    """ASGI middleware: HTTP requests pass on only with a valid key, as that key's owner."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan: the MCP app's session manager
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if not _host_allowed(headers.get("host", "")):
            refusal = Refusal(400, "invalid_request", "This host is not allowed.")
            await refusal.response()(scope, receive, send)
            return
        client = scope.get("client") or ("", 0)
        owner = await on_pool_thread(api_key_owner)(
            authorization=headers.get("authorization", ""), address=client[0]
        )
        if isinstance(owner, Refusal):
            await owner.response()(scope, receive, send)
            return
        token = current_user.set(owner)
        try:
            await self.app(scope, receive, send)
        finally:
            current_user.reset(token)
