"""The site's sync code runs on threads kept between requests, so a signed-in page reuses the
database connection of the thread it runs on instead of opening one (Django's own handler starts
a thread, and with it a connection, for every request)."""

from __future__ import annotations

import threading

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.cached_db import SessionStore
from django.db import connection

from apps.core.asgi import REQUEST_THREADS

pytestmark = pytest.mark.django_db(transaction=True)


def _sessions_opened() -> int:
    """Connections PostgreSQL has accepted for this test database so far."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def _signed_in_cookie(user) -> dict[str, str]:
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return {settings.SESSION_COOKIE_NAME: session.session_key}


def test_signed_in_pages_reuse_the_connections_of_the_kept_threads(asgi_server, user):
    with httpx.Client(base_url=asgi_server, cookies=_signed_in_cookie(user)) as http:
        for _ in range(REQUEST_THREADS):  # every kept thread has its connection
            assert http.get("/").status_code == 200
        before = _sessions_opened()
        for _ in range(60):
            page = http.get("/")
            assert page.status_code == 200 and user.username in page.text
        opened = _sessions_opened() - before
    # Django's handler opened one per page (60); our own test connection's queries count none.
    assert opened < 10, f"{opened} database connections opened for 60 page loads"


def test_pages_still_load_when_every_kept_thread_is_busy(asgi_server, user):
    """More requests at once than kept threads: the others get threads of their own."""
    cookies = _signed_in_cookie(user)
    statuses: list[int] = []

    def load() -> None:
        with httpx.Client(base_url=asgi_server, cookies=cookies, timeout=60) as http:
            statuses.extend(http.get("/").status_code for _ in range(3))

    loaders = [threading.Thread(target=load) for _ in range(REQUEST_THREADS * 2)]
    for loader in loaders:
        loader.start()
    for loader in loaders:
        loader.join()
    assert statuses == [200] * (REQUEST_THREADS * 2 * 3)
