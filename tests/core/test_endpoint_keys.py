"""The operator's LLM API key goes only to the endpoint it was given for: an endpoint chosen in
the admin gets the key set for it, or none."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from apps.accounts.services import api_key_create
from apps.core.llm.clients import async_client, sync_client
from thalamus_site.settings import env_endpoint_keys

pytestmark = pytest.mark.django_db

SECRET = "sk-operator-secret"


@pytest.fixture
def other_endpoint(llm_stub, settings):
    """The stub under another name: to Thalamus, another server."""
    settings.THALAMUS_LLM_API_KEY = SECRET
    return llm_stub.url.replace("127.0.0.1", "localhost")


def _ask(client) -> None:
    client.chat.completions.create(model="qwen2.5:7b", messages=[{"role": "user", "content": "hi"}])


def _keys_sent(llm_stub) -> list[str]:
    return [r["authorization"] for r in llm_stub.requests if r["path"].endswith("/completions")]


def test_the_environments_key_goes_to_its_own_endpoint_only(llm_stub, other_endpoint):
    _ask(sync_client(django_settings.THALAMUS_LLM_BASE_URL, timeout=10))
    _ask(sync_client(other_endpoint, timeout=10))
    assert _keys_sent(llm_stub) == [f"Bearer {SECRET}", "Bearer none"]


def test_an_endpoint_gets_the_key_the_operator_set_for_it(llm_stub, other_endpoint, settings):
    settings.THALAMUS_LLM_ENDPOINT_KEYS = {other_endpoint: "sk-for-that-one"}
    _ask(sync_client(other_endpoint + "/", timeout=10))
    assert _keys_sent(llm_stub) == ["Bearer sk-for-that-one"]


async def test_the_async_client_keeps_the_key_to_its_endpoint_too(llm_stub, other_endpoint):
    await async_client(other_endpoint, timeout=10).chat.completions.create(
        model="qwen2.5:7b", messages=[{"role": "user", "content": "hi"}]
    )
    assert _keys_sent(llm_stub) == ["Bearer none"]


@pytest.mark.django_db(transaction=True)
def test_a_chat_endpoint_set_in_the_admin_never_receives_the_operators_key(
    client, user, llm_stub, other_endpoint, config
):
    config(llm_base_url=other_endpoint)
    llm_stub.script({"content": "Answered elsewhere."})
    _, secret = api_key_create(user=user, name="tests")

    response = client.post(
        "/v1/chat/completions",
        {"model": "thalamus", "messages": [{"role": "user", "content": "hello"}]},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )

    assert response.json()["choices"][0]["message"]["content"] == "Answered elsewhere."
    sent = [r["authorization"] for r in llm_stub.requests]
    assert sent and all(key == "Bearer none" for key in sent), sent


def test_endpoint_keys_are_url_key_pairs(monkeypatch):
    monkeypatch.setenv("THALAMUS_LLM_ENDPOINT_KEYS", "http://a:1/v1/=k1, https://b/v1=k2")
    assert env_endpoint_keys("THALAMUS_LLM_ENDPOINT_KEYS") == {
        "http://a:1/v1": "k1",
        "https://b/v1": "k2",
    }
    monkeypatch.setenv("THALAMUS_LLM_ENDPOINT_KEYS", "gpu-box:8080=k")
    with pytest.raises(ImproperlyConfigured, match="URL=key pairs"):
        env_endpoint_keys("THALAMUS_LLM_ENDPOINT_KEYS")
