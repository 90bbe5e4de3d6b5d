"""The ASGI app the `asgi_server` fixture serves: the product's, its routes recorded for the
route coverage gate (tests/route_coverage.py)."""

from __future__ import annotations

from tests.route_coverage import record_routes
from thalamus_site.asgi import application

record_routes()

__all__ = ["application"]
