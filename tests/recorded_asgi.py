"""The ASGI app the `asgi_server` fixture serves: the product's, its routes recorded for the
route coverage gate (tests/route_coverage.py)."""

from __future__ import annotations

import os

from tests.route_coverage import ROUTE_LOG_ENV, record, record_routes
from thalamus_site import asgi

record_routes()

if os.environ.get(ROUTE_LOG_ENV):
    mcp_app = asgi.mcp_app

    async def recorded_mcp_app(scope, receive, send):
        record(asgi.MCP_PATH.removeprefix("/"))
        return await mcp_app(scope, receive, send)

    # asgi.http_app finds the MCP app by this name on each request.
    asgi.mcp_app = recorded_mcp_app

# The server lives for the whole session while transactional tests flush the database after
# each test, which makes the content types again under new ids: the ids a page cached before
# (the admin's log entry names one) would point at rows that are gone.
from django.contrib.contenttypes.models import ContentType  # noqa: E402  (after Django's setup)


async def application(scope, receive, send):
    if scope["type"] == "http":
        ContentType.objects.clear_cache()
    return await asgi.application(scope, receive, send)
