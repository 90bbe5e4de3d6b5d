from __future__ import annotations

import importlib
import os
import pkgutil

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")
django.setup(set_prefix=False)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.middleware.clickjacking import XFrameOptionsMiddleware  # noqa: E402
from django.middleware.security import SecurityMiddleware  # noqa: E402
from django.template.loader import get_template  # noqa: E402
from django.urls import get_resolver  # noqa: E402

import apps  # noqa: E402
from apps.cognition.prompt_cache import prompt_cache_prime  # noqa: E402
from apps.core.asgi import LeanASGIHandler, SiteASGIHandler, SocketAuthMiddlewareStack  # noqa: E402
from apps.core.llm.clients import sdk_load  # noqa: E402
from apps.core.middleware import content_security_policy, inline  # noqa: E402
from apps.core.warmup import warm_in_background  # noqa: E402
from apps.mcp_server.server import MCP_PATH, mcp_asgi_app  # noqa: E402
from apps.memory.embedding import embedder_warm  # noqa: E402
from apps.memory.query_text import lemmas_load  # noqa: E402
from thalamus_site.celery import app as celery_app  # noqa: E402
from thalamus_site.routing import websocket_urlpatterns  # noqa: E402


def modules_load() -> None:
    """Import every module of the apps but migrations and commands: those a request imports
    where it uses them (the tools, the tasks it queues, template tags) are then ready too."""
    for module in pkgutil.walk_packages(apps.__path__, "apps."):
        if ".migrations" not in module.name and ".management" not in module.name:
            importlib.import_module(module.name)


def urls_load() -> None:
    get_resolver().reverse_dict  # noqa: B018  (imports the URLconf and its views, and indexes it)


def templates_load() -> None:
    """Compile the project's templates, which each process would at its first page."""
    root = settings.BASE_DIR / "templates"
    for path in root.rglob("*.html"):
        get_template(str(path.relative_to(root)))


def queue_connect() -> None:
    """Open the connection a first turn's background tasks are queued on (Celery's pool)."""
    with celery_app.producer_or_acquire() as producer:
        producer.connection.ensure_connection(max_retries=1)


# What a first turn would otherwise load. PRELOAD is plain data, loaded once before `up`'s web
# processes fork (thalamus_site/serve.py): our modules, the LLM's SDK, the URLs (Django imports
# them at the first request) and the templates, which a first request needs, then, if `up` is
# still preparing the database, the recall's lemma dictionary. The rest is loaded on a thread in
# each process once it serves (a thread and a connection do not fork): the queue's connection,
# and the embedder (the local one took 14 s in a fresh process; an HTTP one makes its server
# load the model), then the chat's server reads the start every answer shares, so that a first
# turn finds it in its prompt cache (apps/cognition/prompt_cache.py). A server started another
# way loads it all on that thread (apps/core/warmup.py).
PRELOAD = [
    ("modules", modules_load),
    ("llm sdk", sdk_load),
    ("urls", urls_load),
    ("templates", templates_load),
]
PRELOAD_WHILE_WAITING = [("lemmas", lemmas_load)]
WARM_STEPS = [
    *PRELOAD,
    *PRELOAD_WHILE_WAITING,
    ("queue", queue_connect),
    ("embedder", embedder_warm),
    ("prompt cache", prompt_cache_prime),
]

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


async def lifespan_app(scope, receive, send):
    """The server's start and stop: the warm-up begins, and the MCP session manager runs."""
    warm_in_background(WARM_STEPS)
    return await mcp_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(
            SocketAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
        # Starts and stops the MCP session manager: uvicorn runs with `--lifespan on`.
        "lifespan": lifespan_app,
    }
)
