"""Django's ASGI handlers as Thalamus serves them.

Django runs a request's sync code (sync views, sync middleware hooks, the request signals) on a
thread it starts for that request and drops after it. A persistent database connection belongs
to its thread, so every signed-in page opened a new PostgreSQL connection (measured: 100 page
loads, 102 new connections, each a server process forked and its session options set). Here the
request borrows one of a few threads kept for the process's life, as a WSGI server's are, and
the thread's connection serves the requests after it (CONN_MAX_AGE, CONN_HEALTH_CHECKS).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import SyncToAsync, ThreadSensitiveContext
from channels.auth import AuthMiddleware, get_user
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response

from apps.core.db import on_pool_thread

# Threads kept per process, each with at most one database connection (so 4 web processes keep
# at most 16 more than they did, within PostgreSQL's default 100: docs/operations.md); a request
# that finds them all busy gets a thread of its own, as with Django's handler.
REQUEST_THREADS = 4


class _KeptThread(ThreadSensitiveContext):
    """A request's thread-sensitive context, on a thread that outlives the request.

    Unlike asgiref's own `executor=` mode, a task that outlives the request and makes a
    thread-sensitive call afterwards gets a thread of its own, as with Django's default.
    """

    def __init__(self, executor: ThreadPoolExecutor) -> None:
        super().__init__()
        self.kept = executor

    async def __aenter__(self):
        await super().__aenter__()
        if self.token is not None:  # the outermost context, so the request's own
            SyncToAsync.context_to_thread_executor[self] = self.kept
        return self

    async def __aexit__(self, exc, value, tb):
        # Taken back before the base class shuts the executor down: it serves the next request.
        if SyncToAsync.context_to_thread_executor.get(self) is self.kept:
            del SyncToAsync.context_to_thread_executor[self]
        await super().__aexit__(exc, value, tb)


class SiteASGIHandler(ASGIHandler):
    """Django's handler, each request on one of REQUEST_THREADS kept threads."""

    def __init__(self) -> None:
        super().__init__()
        self._idle: dict[asyncio.AbstractEventLoop, asyncio.Queue] = {}

    def _threads(self) -> asyncio.Queue:
        loop = asyncio.get_running_loop()
        idle = self._idle.get(loop)
        if idle is None:
            idle = self._idle[loop] = asyncio.Queue()
            for _ in range(REQUEST_THREADS):
                idle.put_nowait(ThreadPoolExecutor(max_workers=1, thread_name_prefix="request"))
        return idle

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await super().__call__(scope, receive, send)
        idle = self._threads()
        try:
            executor = idle.get_nowait()
        except asyncio.QueueEmpty:
            # All busy (a no-JavaScript answer holds its thread for the whole answer): a thread
            # for this request alone, as Django does, rather than a wait.
            return await super().__call__(scope, receive, send)
        try:
            async with _KeptThread(executor):
                await self.handle(scope, receive, send)
        finally:
            idle.put_nowait(executor)


class LeanASGIHandler(SiteASGIHandler):
    """A handler with a middleware chain of its own, all of it async.

    The API's callers authenticate with a key on every call: they need none of the site's
    session, CSRF, login, messages or lockout middleware, and under ASGI each of those costs
    thread hops on every request (an authenticated /v1/models round trip: 9.7 → 6.0 ms median).
    """

    def __init__(self, middleware) -> None:
        self.lean_middleware = list(middleware)
        super().__init__()

    def load_middleware(self, is_async=False):
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        handler = convert_exception_to_response(self._get_response_async)
        for factory in reversed(self.lean_middleware):
            handler = convert_exception_to_response(factory(handler))
        self._middleware_chain = handler


class SocketAuthMiddleware(AuthMiddleware):
    """Channels' AuthMiddleware, with the session's user read on any pool thread.

    Channels reads it thread-sensitively, and outside a request's context that means on one
    thread for the whole process: every websocket a page opens queued there behind the others
    (measured with 10 pages opening at once in bench.load: up to 0.4 s before the first turn).
    """

    async def resolve_scope(self, scope):
        scope["user"]._wrapped = await on_pool_thread(get_user.func)(scope)


def SocketAuthMiddlewareStack(inner):  # noqa: N802 (named as Channels' AuthMiddlewareStack)
    return CookieMiddleware(SessionMiddleware(SocketAuthMiddleware(inner)))
