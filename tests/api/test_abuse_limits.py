"""The API's abuse limits: wrong keys are throttled per address, large bodies are refused."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.core.cache import cache

from apps.accounts.services import api_key_create
from apps.accounts.throttle import BAD_KEY_WINDOW_SECONDS
from apps.chat.models import Message

# /v1/models reads the key on a pool thread, with a connection of its own.
pytestmark = pytest.mark.django_db(transaction=True)

GUESSER = "192.0.2.66"
NEIGHBOUR = "192.0.2.67"


@pytest.fixture(autouse=True)
def forget_counters():
    yield
    for address in (GUESSER, NEIGHBOUR):
        cache.delete(f"api:bad-keys:{address}")


def _models(client, key: str, address: str):
    return client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {key}", REMOTE_ADDR=address)


def test_wrong_api_keys_from_one_address_are_throttled_with_429_and_retry_after(client, user):
    _, secret = api_key_create(user=user, name="tests")
    limit = settings.THALAMUS_API_BAD_KEY_LIMIT
    for n in range(limit):
        assert _models(client, f"thk_wrong{n}", GUESSER).status_code == 401

    refused = _models(client, secret, GUESSER)

    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= BAD_KEY_WINDOW_SECONDS
    assert refused.json()["error"]["code"] == "too_many_wrong_keys"
    assert "Try again in" in refused.json()["error"]["message"]
    # Another address with the right key is not held back by the guesser.
    assert _models(client, secret, NEIGHBOUR).status_code == 200


def test_a_few_wrong_keys_do_not_lock_out_the_right_one(client, user):
    _, secret = api_key_create(user=user, name="tests")
    for n in range(settings.THALAMUS_API_BAD_KEY_LIMIT - 1):
        _models(client, f"thk_typo{n}", GUESSER)
    assert _models(client, secret, GUESSER).status_code == 200


def test_a_json_body_over_the_cap_gets_413_and_starts_no_turn(client, user):
    _, secret = api_key_create(user=user, name="tests")
    cap = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    body = json.dumps({"model": "thalamus", "messages": [{"role": "user", "content": "x" * cap}]})

    response = client.post(
        "/v1/chat/completions",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert not Message.objects.exists()


def test_a_form_body_over_the_cap_is_refused_by_the_site(client, user):
    client.force_login(user)
    response = client.post(
        "/accounts/settings/keys/", {"name": "x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE}
    )
    assert response.status_code == 400


@pytest.mark.django_db(transaction=True)
def test_an_answer_beyond_the_users_streams_gets_429_and_starts_no_turn(
    client, user, settings, llm_stub
):
    from apps.chat.admission import stream_slot_release, turn_admit
    from apps.core.selectors import runtime_config

    settings.THALAMUS_STREAMS_PER_USER = 1
    _, secret = api_key_create(user=user, name="tests")
    # An answer streaming to one of the user's pages holds their only slot.
    slot = turn_admit(user_id=user.pk, config=runtime_config())

    def ask():
        return client.post(
            "/v1/chat/completions",
            {"model": "thalamus", "messages": [{"role": "user", "content": "hello"}]},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {secret}",
        )

    refused = ask()
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "too_many_streams"
    assert "You already have 1 answer being written." in refused.json()["error"]["message"]
    assert not Message.objects.exists()

    stream_slot_release(user_id=user.pk, slot=slot)
    assert ask().status_code == 200
    assert ask().status_code == 200, "a finished answer gives its slot back"
