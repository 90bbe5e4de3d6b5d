from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")
django.setup(set_prefix=False)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.middleware.clickjacking import XFrameOptionsMiddleware  # noqa: E402
from django.middleware.security import SecurityMiddleware  # noqa: E402

from apps.core.asgi import LeanASGIHandler, SiteASGIHandler, SocketAuthMiddlewareStack  # noqa: E402
from apps.core.middleware import content_security_policy, inline  # noqa: E402
from apps.mcp_server.server import MCP_PATH, mcp_asgi_app  # noqa: E402
from apps.memory.query_text import lemmas_warm  # noqa: E402
from thalamus_site.routing import websocket_urlpatterns  # noqa: E402

# The recall's lemma dictionary loads while the server starts, not in the first turn's search.
lemmas_warm()

# One process serves everything, static files included; behind a reverse proxy in
# production, the proxy can serve STATIC_ROOT (`collectstatic`) instead.
site_app = ASGIStaticFilesHandler(SiteASGIHandler())
mcp_app = mcp_asgi_app()
# The OpenAI-compatible API: Django's views and URLs, without the site's session, CSRF, login and
# lockout middleware, which a caller with an API key does not use and which under ASGI cost
# thread hops on every call.
API_PREFIX = "/v1/"
api_app = LeanASGIHandler(
    [inline(SecurityMiddleware), content_security_policy, inline(XFrameOptionsMiddleware)]
)


async def http_app(scope, receive, send):
    """/mcp is the MCP SDK's own app and /v1/ Django's lean handler (both with API keys, no
    session or CSRF); the rest is Django's site."""
    if scope["path"] == MCP_PATH or scope["path"].startswith(f"{MCP_PATH}/"):
        return await mcp_app(scope, receive, send)
    if scope["path"].startswith(API_PREFIX):
        return await api_app(scope, receive, send)
    return await site_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(
            SocketAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
        # Starts and stops the MCP session manager: uvicorn runs with `--lifespan on`.
        "lifespan": mcp_app,
    }
)
