"""Component checks behind /healthz. Each returns a dict with at least `ok`."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import connection

from apps.core.cache import redis_client
from apps.core.heartbeat import HEARTBEAT_STALE_AFTER, last_heartbeat
from apps.core.warmup import warm_report


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}".strip()[:300]


def check_database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT version()")
            version = cursor.fetchone()[0]
        return {"ok": True, "version": version.split(" on ")[0]}
    except Exception as exc:  # a health check reports every failure instead of raising
        return {"ok": False, "error": _error(exc)}


def check_pgvector() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
        if row is None:
            return {"ok": False, "error": "the vector extension is not installed; run migrate"}
        return {"ok": True, "version": row[0]}
    except Exception as exc:
        return {"ok": False, "error": _error(exc)}


def check_redis() -> dict:
    try:
        client = redis_client()
        client.ping()
        return {"ok": True}
    except Exception as exc:
        return {"ok": False, "error": _error(exc)}


def check_worker() -> dict:
    try:
        heartbeat = last_heartbeat()
    except Exception as exc:
        return {"ok": False, "error": _error(exc)}
    if heartbeat is None:
        return {"ok": False, "error": "no Celery worker heartbeat seen"}
    age = time.time() - heartbeat["at"]
    result = {"ok": age < HEARTBEAT_STALE_AFTER, "hostname": heartbeat["hostname"]}
    result["last_heartbeat_seconds_ago"] = round(age, 1)
    if not result["ok"]:
        result["error"] = f"last worker heartbeat {age:.0f} s ago"
    return result


def check_llm() -> dict:
    from apps.core.llm.gateway import models_of

    base_url = settings.THALAMUS_LLM_BASE_URL
    try:
        models = models_of(base_url, timeout=2.0)
        return {"ok": True, "base_url": base_url, "models": models[:20]}
    except Exception as exc:
        return {"ok": False, "base_url": base_url, "error": _error(exc)}


def check_models() -> dict:
    """Each role's model, window and reply cap, whether its server lists it (and each of its
    fallbacks), and any silent truncation seen in the last day."""
    from apps.core.llm.limits import all_model_limits, configured_models, truncation_warnings
    from apps.core.selectors import runtime_config

    try:
        config = runtime_config()
        roles = {limits.role: limits.as_dict() for limits in all_model_limits(config)}
        configured = configured_models(config)
        warnings = truncation_warnings(config)
    except Exception as exc:
        return {"ok": False, "error": _error(exc)}
    for model in configured:
        if model.fallback:
            roles[model.role].setdefault("fallbacks", []).append(
                {"model": model.model, "base_url": model.base_url, "listed": model.listed}
            )
        else:
            roles[model.role]["listed"] = model.listed
    missing = [model for model in configured if model.missing]
    result = {"ok": not warnings and not missing, "roles": roles, "truncation_warnings": warnings}
    if missing:
        result["error"] = missing[0].fix
    elif warnings:
        result["error"] = (
            f"{warnings[0]['model']} at {warnings[0]['base_url']} silently drops the start of "
            f"long prompts: {warnings[0]['fix']}"
        )
    return result


def system_health() -> tuple[bool, dict]:
    """(healthy, report): healthy needs database and redis; the rest (the worker, the LLM, this
    web process's warm-up) is reported only."""
    report = {
        "database": check_database(),
        "pgvector": check_pgvector(),
        "redis": check_redis(),
        "worker": check_worker(),
        "llm": check_llm(),
        "models": check_models(),
    }
    # A web process that is still loading what a first turn needs says so; it serves meanwhile.
    if (warm := warm_report()) is not None:
        report["warm"] = warm
    healthy = report["database"]["ok"] and report["redis"]["ok"]
    return healthy, {"status": "ok" if healthy else "error", **report}
