from __future__ import annotations

import time

import pytest

from apps.core.heartbeat import last_heartbeat


@pytest.mark.django_db
def test_healthz_reports_every_component_to_staff(admin_client, llm_stub):
    response = admin_client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"]["ok"] and body["database"]["version"].startswith("PostgreSQL")
    assert body["pgvector"] == {"ok": True, "version": body["pgvector"]["version"]}
    assert body["pgvector"]["version"].startswith("0.8")
    assert body["redis"]["ok"] is True
    assert body["llm"]["ok"] is True and "qwen2.5:7b" in body["llm"]["models"]
    assert "worker" in body


@pytest.mark.django_db
def test_an_unreachable_llm_is_reported_not_fatal(admin_client, settings):
    settings.THALAMUS_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    response = admin_client.get("/healthz")
    assert response.status_code == 200
    llm = response.json()["llm"]
    assert llm["ok"] is False and "could not be reached" in llm["error"]


@pytest.mark.django_db
def test_a_redis_that_is_down_makes_healthz_503(client, settings, tmp_path):
    settings.THALAMUS_HEALTH_TOKEN = "monitor-token"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"unix://{tmp_path}/nothing.sock",
        }
    }
    response = client.get("/healthz", HTTP_AUTHORIZATION="Bearer monitor-token")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "error" and body["redis"]["ok"] is False
    assert body["database"]["ok"] is True


def test_a_running_worker_beats_and_healthz_sees_it(celery_worker, admin_client):
    deadline = time.monotonic() + 45
    while last_heartbeat() is None or last_heartbeat()["hostname"] != celery_worker.hostname:
        assert time.monotonic() < deadline, "the worker never wrote a heartbeat"
        time.sleep(0.1)
    worker = admin_client.get("/healthz").json()["worker"]
    assert worker["ok"] is True and worker["hostname"] == celery_worker.hostname


@pytest.mark.django_db
def test_healthz_shows_each_models_window_and_cap(admin_client, llm_stub, config):
    config(answer_max_tokens=900)
    llm_stub.set_defaults(server="llamacpp", context=8192)

    models = admin_client.get("/healthz").json()["models"]

    assert models["ok"] is True
    chat = models["roles"]["chat"]
    assert (chat["context"], chat["reply_cap"], chat["source"]) == (8192, 900, "llama.cpp /props")
    assert set(models["roles"]) == {
        "chat",
        "reflection",
        "critic",
        "episode",
        "title",
        "router",
        "embedding",
    }


@pytest.mark.django_db
def test_healthz_reports_a_server_that_silently_truncates(admin_client, llm_stub):
    from apps.core.llm.limits import CHAT, role_endpoint, truncation_warn

    truncation_warn(endpoint=role_endpoint(CHAT), role=CHAT, sent_estimate=3900, reported=2048)

    models = admin_client.get("/healthz").json()["models"]

    assert models["ok"] is False
    assert "OLLAMA_CONTEXT_LENGTH" in models["error"]
    assert models["truncation_warnings"][0]["reported_prompt_tokens"] == 2048
