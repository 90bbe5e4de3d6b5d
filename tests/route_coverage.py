"""The route coverage gate: the whole suite fails if a route was never exercised.

Like Zulip's "Some URLs are untested!": every URL pattern (the admin's included), every
websocket route and the MCP endpoint must be called by at least one test. Every process of the
run — the xdist controller and workers, and the uvicorn children of `asgi_server` (which serve
`tests.recorded_asgi`) — wraps the view or consumer of each route with a recorder. The first
time a route's view runs in a process, the recorder appends its pattern to that process's file
in one directory per run (`THALAMUS_ROUTE_LOG_DIR`, made by the controller, inherited by all).
A route counts as exercised when its view ran: a request that middleware turned away before
the view (a login redirect, a CSRF refusal) does not count.

At the end of the session the controller compares what was recorded with every route and fails
the session with the untested ones. It does so only when the whole suite ran (`make test`: no
file arguments, no -k, -m, --lf or --deselect), since one file alone never calls every route;
`--all-routes-tested` asks for the check on any selection.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from asgiref.sync import iscoroutinefunction

ROUTE_LOG_ENV = "THALAMUS_ROUTE_LOG_DIR"

_recorded: set[str] = set()


def _join(prefix: str, pattern) -> str:
    # As Django joins them for ResolverMatch.route: a nested regex loses its leading ^.
    text = str(pattern)
    return prefix + text.removeprefix("^") if prefix else text


def _routes(patterns, prefix: str = "") -> Iterator[tuple[str, object]]:
    """Every endpoint under `patterns`, as (its full pattern, its URLPattern)."""
    for pattern in patterns:
        route = _join(prefix, pattern.pattern)
        if hasattr(pattern, "url_patterns"):
            yield from _routes(pattern.url_patterns, route)
        else:
            yield route, pattern


def all_routes() -> dict[str, object | None]:
    """Every URL pattern and websocket route of the product, by its full pattern, and the MCP
    endpoint, which thalamus_site/asgi.py serves beside Django's URLs (no pattern: None)."""
    from django.urls import get_resolver

    from apps.mcp_server.server import MCP_PATH
    from thalamus_site.routing import websocket_urlpatterns

    routes: dict[str, object | None] = dict(_routes(get_resolver().url_patterns))
    routes.update(_routes(websocket_urlpatterns))
    routes[MCP_PATH.removeprefix("/")] = None
    return routes


def record(route: str) -> None:
    if route in _recorded:
        return
    _recorded.add(route)
    with open(Path(os.environ[ROUTE_LOG_ENV]) / f"{os.getpid()}.routes", "a") as log:
        log.write(route + "\n")


def _recording(route: str, view):
    if iscoroutinefunction(view):

        @functools.wraps(view)
        async def recorded(*args, **kwargs):
            record(route)
            return await view(*args, **kwargs)

    else:

        @functools.wraps(view)
        def recorded(*args, **kwargs):
            record(route)
            return view(*args, **kwargs)

    recorded.records_route = True
    return recorded


def record_routes() -> None:
    """Wrap every route's view and consumer in this process with the recorder."""
    if not os.environ.get(ROUTE_LOG_ENV):
        return
    for route, pattern in all_routes().items():
        if pattern is not None and not getattr(pattern.callback, "records_route", False):
            pattern.callback = _recording(route, pattern.callback)


def recorded_routes(directory: Path) -> set[str]:
    # The home page's route is the empty string: an empty line is a route too.
    return {line for log in directory.glob("*.routes") for line in log.read_text().splitlines()}


def _whole_suite(config) -> bool:
    from _pytest.config import Config

    option = config.option
    return (
        config.args_source is Config.ArgsSource.TESTPATHS
        and not option.keyword
        and not option.markexpr
        # Without the cache plugin (-p no:cacheprovider) there is no --lf option at all.
        and not getattr(option, "lf", False)
        and not option.deselect
        and not option.collectonly
        and not getattr(option, "stepwise", False)
    )


def pytest_addoption(parser):
    parser.addoption(
        "--all-routes-tested",
        action="store_true",
        help="fail unless every route was exercised, even when only some tests ran",
    )


def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        # The controller (or the only process): one directory for the whole run.
        os.environ[ROUTE_LOG_ENV] = tempfile.mkdtemp(prefix="thalamus-routes-")
    record_routes()


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if hasattr(config, "workerinput"):
        return
    directory = Path(os.environ.pop(ROUTE_LOG_ENV))
    try:
        if not (config.getoption("all_routes_tested") or _whole_suite(config)):
            return
        if session.testscollected == 0 or session.shouldstop:
            return
        untested = sorted(set(all_routes()) - recorded_routes(directory))
        if untested:
            config.untested_routes = untested
            session.exitstatus = 1
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    untested = getattr(config, "untested_routes", None)
    if not untested:
        return
    terminalreporter.section("Some URLs are untested!", red=True)
    for route in untested:
        terminalreporter.write_line(f"  /{route}")
    terminalreporter.write_line(
        "Every route needs a test that calls its view (tests/route_coverage.py)."
    )
