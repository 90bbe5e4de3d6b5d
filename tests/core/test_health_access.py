"""/healthz tells anyone whether Thalamus is up; only staff or a monitor's token what runs it."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db

TOKEN = "monitor-token-1"


@pytest.fixture(autouse=True)
def health_token(settings):
    settings.THALAMUS_HEALTH_TOKEN = TOKEN


def test_an_anonymous_caller_gets_only_ok(client, llm_stub, celery_worker):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_an_anonymous_caller_is_told_degraded_without_versions_hosts_or_urls(
    client, settings, user
):
    settings.THALAMUS_LLM_BASE_URL = "http://10.1.2.3:9/v1"
    response = client.get("/healthz")

    assert response.status_code == 200  # the database and Redis answer
    assert response.json() == {"status": "degraded"}
    text = response.content.decode()
    assert "10.1.2.3" not in text and "PostgreSQL" not in text and "hostname" not in text


def test_a_logged_in_user_who_is_not_staff_gets_the_summary_too(client, user, settings):
    client.force_login(user)
    assert set(client.get("/healthz").json()) == {"status"}


def test_staff_and_the_health_token_get_every_component(admin_client, client, llm_stub):
    for body in (
        admin_client.get("/healthz").json(),
        client.get("/healthz", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json(),
    ):
        assert body["database"]["version"].startswith("PostgreSQL")
        assert body["llm"]["base_url"] == llm_stub.url
        assert {"pgvector", "redis", "worker", "models"} <= set(body)


def test_a_wrong_token_is_refused(client):
    response = client.get("/healthz", HTTP_AUTHORIZATION="Bearer guessed")
    assert response.status_code == 403
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.content)
