"""Settings from environment variables; a bad value stops start-up with a clear message."""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from django.core.exceptions import ImproperlyConfigured

from apps.core import embedded

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, "").strip()
    if value:
        return value
    if default is None:
        raise ImproperlyConfigured(f"Set the environment variable {name}.")
    return default


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}.")


def env_int(name: str, default: int, *, minimum: int = 1, maximum: int = 1 << 20) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}.") from None
    if not minimum <= value <= maximum:
        raise ImproperlyConfigured(f"{name} must be between {minimum} and {maximum}, not {value}.")
    return value


def env_url(name: str, default: str, schemes: set[str]) -> str:
    value = env_str(name, default)
    parsed = urlparse(value)
    if parsed.scheme not in schemes:
        allowed = ", ".join(sorted(schemes))
        raise ImproperlyConfigured(
            f"{name} must be a URL starting with one of {allowed}: {value!r}"
        )
    return value


# pgvector's filtered HNSW scans (apps.memory.selectors) keep scanning past other owners' rows
# instead of stopping after ef_search candidates. Set per connection, so a search needs no
# transaction and SET LOCAL round trips of its own.
HNSW_SESSION_OPTIONS = (
    "-c hnsw.iterative_scan=relaxed_order -c hnsw.ef_search=200 -c hnsw.max_scan_tuples=20000"
)


def env_endpoint_keys(name: str) -> dict[str, str]:
    """`URL=key` pairs, separated by spaces or commas: the key to send to each endpoint."""
    keys = {}
    for pair in os.environ.get(name, "").replace(",", " ").split():
        url, equals, key = pair.partition("=")
        if not equals or not key or urlparse(url).scheme not in {"http", "https"}:
            raise ImproperlyConfigured(
                f"{name} must be URL=key pairs, such as http://gpu-box:8080/v1=sk-..., "
                f"not {pair.split('=')[0]!r}=…"
            )
        keys[url.rstrip("/")] = key
    return keys


def database_from_url(url: str) -> dict:
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgresql:// URL, not {url!r}.")
    query = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
    name = parsed.path.lstrip("/")
    if not name:
        raise ImproperlyConfigured("DATABASE_URL must name a database: postgresql://…/NAME")
    return {
        "ENGINE": "apps.core.postgres",
        "NAME": name,
        "USER": parsed.username or "",
        "PASSWORD": parsed.password or "",
        "HOST": query.pop("host", parsed.hostname or ""),
        "PORT": str(query.pop("port", parsed.port or "")),
        # Persistent connections: under ASGI every thread hop would otherwise open a new one,
        # several milliseconds each on the chat's hot path. (A psycopg pool leaks a checked-out
        # connection for every executor thread that goes away, which exhausts it.)
        "CONN_MAX_AGE": env_int("THALAMUS_DB_CONN_MAX_AGE", 300, minimum=0),
        # A check before each thread hop's first query: without it a database restart fails
        # one request or chat turn per pooled connection (tests/core/test_restarts.py). The
        # backend (apps.core.postgres) pings only a connection whose socket shows the server
        # said something since its last reply, as a server ending a session does.
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": {
            "connect_timeout": 5,
            **query,
            "options": " ".join(filter(None, [query.get("options", ""), HNSW_SESSION_OPTIONS])),
        },
        "TEST": {"NAME": os.environ.get("THALAMUS_TEST_DATABASE") or f"test_{name}"},
    }


DATA_DIR = embedded.data_dir()
# Names this instance's keys, channel groups and task queue, so several instances (or parallel
# test workers) can share one Redis.
INSTANCE = env_str("THALAMUS_INSTANCE", "thalamus")

# The LLM metrics of every process of this instance (web, workers) are files here, summed at
# /metrics (apps.core.metrics); `up` empties it when it starts.
THALAMUS_METRICS_DIR = DATA_DIR / "metrics" / INSTANCE
# Lets a Prometheus scraper read /metrics as `Authorization: Bearer <token>`; unset, only a
# staff login can.
THALAMUS_METRICS_TOKEN = os.environ.get("THALAMUS_METRICS_TOKEN", "").strip()
# Lets a monitor read /healthz's details as `Authorization: Bearer <token>`; without it (or a
# staff login) /healthz says only "ok" or "degraded".
THALAMUS_HEALTH_TOKEN = os.environ.get("THALAMUS_HEALTH_TOKEN", "").strip()

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    key = os.environ.get("SECRET_KEY", "").strip()
    if key:
        return key
    path = DATA_DIR / "secret_key"
    if path.exists():
        return path.read_text().strip()
    key = secrets.token_urlsafe(50)
    try:
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(key)
        path.chmod(0o600)
    except OSError:
        # An unwritable data dir is reported by `up` in one sentence; a throwaway key lets
        # `manage.py help` and friends still run.
        pass
    return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = [
    host.strip()
    for host in env_str("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",")
    if host.strip()
]
CSRF_TRUSTED_ORIGINS = [
    origin.strip() for origin in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if origin
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "channels",
    "django_htmx",
    "django_celery_beat",
    "axes",
    "apps.core",
    "apps.accounts",
    "apps.chat",
    "apps.cognition",
    "apps.api",
    "apps.mcp_server",
    "apps.memory",
    "apps.dashboard",
    "apps.imports",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "apps.core.middleware.content_security_policy",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    # Dates in the signed-in user's time zone (their settings).
    "apps.accounts.middleware.user_time_zone_middleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a lockout raised by authentication into its response.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "thalamus_site.urls"
ASGI_APPLICATION = "thalamus_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.core.context_processors.product",
                "apps.accounts.context_processors.page_preferences",
            ],
        },
    },
]

DATABASES = {"default": database_from_url(env_str("DATABASE_URL", embedded.database_url()))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_url("REDIS_URL", embedded.redis_url(), {"redis", "rediss", "unix"})


def celery_url(url: str) -> str:
    # kombu and the result backend spell a unix-socket Redis URL differently from redis-py.
    if url.startswith("unix://"):
        return "redis+socket://" + url.removeprefix("unix://")
    return url


CACHES = {
    "default": {
        "BACKEND": "apps.core.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": INSTANCE,
    }
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [{"address": REDIS_URL}], "prefix": INSTANCE},
    }
}

SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    # Not a rule: it hears of every password change and closes that user's open sockets.
    {"NAME": "apps.accounts.sockets.PasswordChangeClosesSockets"},
]
# Failed logins (the site's form and the admin's) counted in Redis: per (account, address) by
# django-axes, per account and per address by apps/accounts/lockout.py, which says the policy.
AUTHENTICATION_BACKENDS = [
    "apps.accounts.lockout.LoginLockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "axes.handlers.cache.AxesCacheHandler"
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_FAILURE_LIMIT = env_int("THALAMUS_LOGIN_ATTEMPTS", 10, maximum=1000)
# Failures for one account from every address together (guessing spread over addresses).
THALAMUS_LOGIN_ACCOUNT_ATTEMPTS = env_int("THALAMUS_LOGIN_ACCOUNT_ATTEMPTS", 50, maximum=100000)
# Different accounts one address may fail for before it is locked out (password spraying).
THALAMUS_LOGIN_ADDRESS_ACCOUNTS = env_int("THALAMUS_LOGIN_ADDRESS_ACCOUNTS", 10, maximum=100000)
AXES_COOLOFF_TIME = timedelta(
    seconds=env_int("THALAMUS_LOGIN_LOCKOUT_SECONDS", 900, minimum=1, maximum=86400)
)
# A try during a lockout is refused unread and does not restart it.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "apps.accounts.lockout.login_locked_out"
AXES_VERBOSE = False
# With the cache handler axes keeps nothing in its tables: its admin pages would list nothing,
# and saving one of their rows fails.
AXES_ENABLE_ADMIN = False
# Wrong API keys one client address may send in 5 minutes before /v1 answers it 429.
THALAMUS_API_BAD_KEY_LIMIT = env_int("THALAMUS_API_BAD_KEY_LIMIT", 20, maximum=100000)
# The largest request body read into memory: a form's fields or an API request's JSON (file
# uploads are counted apart). Larger: the site answers 400, the /v1 API 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int(
    "THALAMUS_MAX_BODY_BYTES", 2 * 1024 * 1024, minimum=64 * 1024, maximum=1 << 30
)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
THALAMUS_OPEN_SIGNUP = env_bool("THALAMUS_OPEN_SIGNUP", False)

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"

SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
# Behind TLS (a reverse proxy that terminates it and sets X-Forwarded-Proto): secure cookies,
# HSTS and a redirect of plain HTTP. Off, Thalamus serves plain HTTP, as on a LAN.
THALAMUS_HTTPS = env_bool("THALAMUS_HTTPS", False)
if THALAMUS_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    # Health checks and scrapers on the internal network speak plain HTTP.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = 365 * 24 * 3600
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

# The LLM endpoint (any OpenAI-compatible server; Ollama by default).
THALAMUS_LLM_BASE_URL = env_url(
    "THALAMUS_LLM_BASE_URL", "http://localhost:11434/v1", {"http", "https"}
)
THALAMUS_LLM_API_KEY = env_str("THALAMUS_LLM_API_KEY", "ollama")
# Where embeddings are asked for; blank: the chat's base URL. llama.cpp's server serves one
# model, so with it the embedding model runs as a second server (`llama-server --embeddings`).
THALAMUS_EMBED_BASE_URL = (
    env_url("THALAMUS_EMBED_BASE_URL", "", {"http", "https"})
    if env_str("THALAMUS_EMBED_BASE_URL", "")
    else ""
)
# The environment's key goes only to the base URLs it names (THALAMUS_LLM_BASE_URL, and
# THALAMUS_EMBED_BASE_URL); an endpoint chosen in the admin
# (the runtime configuration's base URLs and fallbacks) gets the key set for it here, or none.
THALAMUS_LLM_ENDPOINT_KEYS = env_endpoint_keys("THALAMUS_LLM_ENDPOINT_KEYS")
THALAMUS_CHAT_MODEL = env_str("THALAMUS_CHAT_MODEL", "qwen2.5:7b")
THALAMUS_EMBED_MODEL = env_str("THALAMUS_EMBED_MODEL", "nomic-embed-text")
THALAMUS_EMBED_DIM = env_int("THALAMUS_EMBED_DIM", 768, minimum=8, maximum=16000)
THALAMUS_DEMO = env_bool("THALAMUS_DEMO", False)
# The largest websocket frame a browser may send (a message of max_message_chars characters
# fits); larger, the socket is closed with 1009.
THALAMUS_WS_MAX_BYTES = env_int(
    "THALAMUS_WS_MAX_BYTES", 4 * 1024 * 1024, minimum=64 * 1024, maximum=1 << 30
)
# Answers one user may have streaming at once, over all their conversations and the API.
THALAMUS_STREAMS_PER_USER = env_int("THALAMUS_STREAMS_PER_USER", 3, maximum=1000)
# Requests Ollama generates at once: set it to the server's own OLLAMA_NUM_PARALLEL, which Ollama
# does not report. Background calls then use the spare ones instead of giving way to the chat.
THALAMUS_OLLAMA_NUM_PARALLEL = env_int("THALAMUS_OLLAMA_NUM_PARALLEL", 1, maximum=256)
# The window Ollama runs a model with when its Modelfile sets no num_ctx: set it to the server's
# own OLLAMA_CONTEXT_LENGTH, which Ollama reports only once the model is loaded (/api/ps).
THALAMUS_OLLAMA_CONTEXT_LENGTH = env_int(
    "THALAMUS_OLLAMA_CONTEXT_LENGTH", 4096, minimum=512, maximum=1 << 22
)
# Seconds to wait for the LLM's next bytes before giving up on an answer.
THALAMUS_LLM_TIMEOUT = env_int("THALAMUS_LLM_TIMEOUT", 60, minimum=1, maximum=3600)

CELERY_BROKER_URL = celery_url(REDIS_URL)
CELERY_RESULT_BACKEND = celery_url(REDIS_URL)
CELERY_TASK_DEFAULT_QUEUE = INSTANCE
# Background LLM calls have a queue and a worker of their own (`up` starts it).
THALAMUS_BACKGROUND_QUEUE = f"{INSTANCE}.llm"
THALAMUS_BACKGROUND_CONCURRENCY = env_int(
    "THALAMUS_BACKGROUND_CONCURRENCY", 1, minimum=1, maximum=64
)
# uvicorn workers `up` runs on its one port (compose: in each `web` replica). Two on a machine
# of two cores or more: with 50 users chatting, the slowest twentieth of first tokens came
# ~83 ms after the model's with two against ~110 ms with one (bench/README.md, load).
THALAMUS_WEB_PROCESSES = env_int(
    "THALAMUS_WEB_PROCESSES", min(2, os.cpu_count() or 1), minimum=1, maximum=64
)
CELERY_TASK_ROUTES = {
    name: {"queue": THALAMUS_BACKGROUND_QUEUE}
    for name in (
        "cognition.reflect",
        "cognition.reflect_conversation",
        "cognition.criticise",
        "cognition.criticise_unreviewed",
        "cognition.change_world",
        "cognition.summarise_episode",
        "imports.learn",
        "apps.chat.tasks.title_conversation",
        "cognition.prime_prompt_cache",
    )
}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 600
CELERY_TASK_SOFT_TIME_LIMIT = 540
# Unacked tasks return only after the visibility timeout; it must outlast the longest task.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 900}
CELERY_RESULT_EXPIRES = 3600
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = TIME_ZONE
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fix-up closes a worker's database connection before and after every task
# unless this many tasks have run: each task then started a PostgreSQL backend of its own, and a
# backend's start and first queries cost PostgreSQL more CPU than the task's own statements (a
# chat turn leaves three to five tasks). So it never closes them: the worker treats each task as
# Django treats a request instead (thalamus_site/celery.py), keeping the connection up to
# CONN_MAX_AGE and pinging it before the task's first query.
CELERY_DB_REUSE_MAX = 2**62

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # A line for every request to an LLM or embedding server: the gateway counts them in
        # /metrics and logs their failures itself.
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
    },
}
