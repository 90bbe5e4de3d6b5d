"""The OpenAI-compatible API, driven by the official `openai` package against the real server."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from apps.accounts.models import ApiKey
from apps.accounts.services import api_key_create, api_key_revoke
from apps.chat.conversation_services import conversation_create
from apps.chat.models import Conversation, Message
from apps.chat.services import message_send
from apps.core.models import RuntimeConfig
from apps.core.services import runtime_config_save

pytestmark = pytest.mark.django_db(transaction=True)

HEADER = "X-Thalamus-Conversation"


@pytest.fixture
def client_for(asgi_server):
    def make(user) -> openai.OpenAI:
        _, secret = api_key_create(user=user, name="tests")
        return openai.OpenAI(
            base_url=f"{asgi_server}/v1", api_key=secret, max_retries=0, timeout=20
        )

    return make


def _chat_requests(llm_stub) -> list[dict]:
    return [r["body"] for r in llm_stub.requests if r["path"].endswith("/chat/completions")]


def _ask(client: openai.OpenAI, text: str, **kwargs):
    return client.chat.completions.with_raw_response.create(
        model="thalamus", messages=[{"role": "user", "content": text}], **kwargs
    )


def test_it_lists_the_thalamus_model_and_each_chat_model_of_the_chats_server(
    client_for, user, llm_stub
):
    models = client_for(user).models.list()
    ids = [m.id for m in models.data]
    assert ids[0] == "thalamus"
    # The server's embedding model (nomic-embed-text) cannot answer, so it is not offered.
    assert "nomic-embed-text" in llm_stub.models
    chat = [name for name in llm_stub.models if name != "nomic-embed-text"]
    assert ids[1:] == [f"thalamus/{name}" for name in chat]
    assert {m.owned_by for m in models.data} == {"thalamus"}


def test_a_listed_model_answers_through_its_name(client_for, user, llm_stub):
    client = client_for(user)
    listed = [m.id for m in client.models.list().data if m.id.startswith("thalamus/")]
    llm_stub.script({"content": "Answered by the second model."})
    reply = client.chat.completions.create(
        model=listed[-1], messages=[{"role": "user", "content": "Which model is this?"}]
    )
    assert reply.choices[0].message.content == "Answered by the second model."
    asked = [r["body"]["model"] for r in llm_stub.requests if r["path"].endswith("/completions")]
    assert asked[-1] == listed[-1].removeprefix("thalamus/")


def test_a_non_streaming_reply_carries_usage_and_starts_a_conversation(client_for, user, llm_stub):
    llm_stub.script({"content": "Hello there, Alice."})
    raw = _ask(client_for(user), "Hi, I am Alice")
    completion = raw.parse()
    assert completion.model == "thalamus" and completion.object == "chat.completion"
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content == "Hello there, Alice."
    assert completion.choices[0].finish_reason == "stop"

    conversation = Conversation.objects.get(pk=int(raw.headers[HEADER]))
    assert conversation.owner == user
    reply = conversation.messages.get(role="assistant")
    assert completion.id == f"chatcmpl-{reply.pk}"
    assert reply.status == Message.Status.COMPLETE
    assert completion.usage.completion_tokens == reply.completion_tokens == 3
    assert completion.usage.prompt_tokens == reply.prompt_tokens > 0
    assert completion.usage.total_tokens == reply.prompt_tokens + reply.completion_tokens
    assert conversation.messages.get(role="user").content == "Hi, I am Alice"


def test_a_streamed_reply_assembles_to_the_full_answer_with_usage(client_for, user, llm_stub):
    answer = "One two three four five six seven."
    llm_stub.script({"content": answer, "tps": 200})
    raw = _ask(client_for(user), "count", stream=True, stream_options={"include_usage": True})
    chunks = list(raw.parse())

    assert raw.headers["content-type"].startswith("text/event-stream")
    assert Conversation.objects.filter(pk=int(raw.headers[HEADER]), owner=user).exists()
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == answer
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 7
    assert Message.objects.get(role="assistant").content == answer


def test_an_answer_cut_at_its_cap_finishes_with_length_streamed_or_not(
    client_for, user, llm_stub, config
):
    config(answer_max_tokens=16)
    llm_stub.script({"content": "word " * 40}, {"content": "word " * 40})

    completion = _ask(client_for(user), "talk at length").parse()
    chunks = list(_ask(client_for(user), "again", stream=True).parse())

    assert completion.choices[0].finish_reason == "length"
    assert completion.usage.completion_tokens == 16
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


def test_a_stream_without_include_usage_sends_no_usage_chunk(client_for, user, llm_stub):
    llm_stub.script({"content": "short answer"})
    chunks = list(
        client_for(user).chat.completions.create(
            model="thalamus", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


def test_the_conversation_header_continues_the_same_conversation(client_for, user, llm_stub):
    llm_stub.script({"content": "Nice to meet you, Alice."}, {"content": "You are Alice."})
    client = client_for(user)
    first = _ask(client, "My name is Alice.")
    conversation_id = first.headers[HEADER]
    second = _ask(client, "What is my name?", extra_headers={HEADER: conversation_id})

    assert second.headers[HEADER] == conversation_id
    assert second.parse().choices[0].message.content == "You are Alice."
    prompt = _chat_requests(llm_stub)[-1]["messages"]
    assert [(m["role"], m["content"]) for m in prompt[1:]] == [
        ("user", "My name is Alice."),
        ("assistant", "Nice to meet you, Alice."),
        ("user", "What is my name?"),
    ]
    assert Conversation.objects.count() == 1
    assert Message.objects.filter(conversation_id=conversation_id).count() == 4


def test_only_the_last_user_message_is_the_new_turn(client_for, user, llm_stub):
    llm_stub.script({"content": "ok"})
    client_for(user).chat.completions.create(
        model="thalamus",
        messages=[
            {"role": "system", "content": "You are a pirate."},
            {"role": "user", "content": "old question"},
            {"role": "assistant", "content": "old answer"},
            {"role": "user", "content": [{"type": "text", "text": "new question"}]},
        ],
    )
    assert list(Message.objects.filter(role="user").values_list("content", flat=True)) == [
        "new question"
    ]


def test_another_users_conversation_is_not_found(client_for, user, other_user, llm_stub):
    alices = conversation_create(user=user)
    message_send(conversation=alices, content="my secret")
    mallory = client_for(other_user)
    for stream in (False, True):
        with pytest.raises(openai.NotFoundError) as caught:
            mallory.chat.completions.create(
                model="thalamus",
                messages=[{"role": "user", "content": "what did alice say?"}],
                stream=stream,
                extra_headers={HEADER: str(alices.pk)},
            )
        assert caught.value.body["code"] == "conversation_not_found"
    assert alices.messages.count() == 2
    assert not Conversation.objects.filter(owner=other_user).exists()
    assert _chat_requests(llm_stub) == []


def test_an_unknown_conversation_is_not_found(client_for, user):
    for raw_id in ("999999", "not-a-number"):
        with pytest.raises(openai.NotFoundError):
            _ask(client_for(user), "hi", extra_headers={HEADER: raw_id})


def test_a_bad_key_is_refused(asgi_server, user):
    client = openai.OpenAI(base_url=f"{asgi_server}/v1", api_key="thk_deadbeef_nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        client.models.list()
    assert caught.value.body["type"] == "authentication_error"
    with pytest.raises(openai.AuthenticationError):
        _ask(client, "hi")
    assert not Message.objects.exists()


def test_a_revoked_key_is_refused(client_for, user):
    client = client_for(user)
    client.models.list()
    api_key_revoke(key=ApiKey.objects.get(user=user))
    with pytest.raises(openai.AuthenticationError):
        client.models.list()


def test_a_missing_key_gets_openais_error_shape(asgi_server):
    response = httpx.post(f"{asgi_server}/v1/chat/completions", json={"messages": []})
    assert response.status_code == 401
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}


def test_a_keys_last_use_is_recorded_at_most_once_a_minute(client_for, user):
    from datetime import timedelta

    client = client_for(user)
    assert ApiKey.objects.get(user=user).last_used_at is None
    client.models.list()
    first = ApiKey.objects.get(user=user).last_used_at
    assert first is not None
    client.models.list()
    assert ApiKey.objects.get(user=user).last_used_at == first, "no write within the minute"
    ApiKey.objects.filter(user=user).update(last_used_at=first - timedelta(minutes=2))
    client.models.list()
    assert ApiKey.objects.get(user=user).last_used_at > first


def test_an_upstream_failure_is_a_502_and_the_reply_is_marked_failed(client_for, user, llm_stub):
    llm_stub.script({"fault": "http_500"})
    with pytest.raises(openai.APIStatusError) as caught:
        _ask(client_for(user), "hi")
    assert caught.value.status_code == 502
    assert caught.value.body["code"] == "upstream_error"
    assert "HTTP 500" in caught.value.body["message"]
    reply = Message.objects.get(role="assistant")
    assert reply.status == Message.Status.FAILED
    assert caught.value.response.headers[HEADER] == str(reply.conversation_id)


def test_an_upstream_failure_mid_stream_ends_the_stream_with_an_error(client_for, user, llm_stub):
    llm_stub.script({"content": "a rather long answer that will be cut off", "fault": "drop"})
    stream = client_for(user).chat.completions.create(
        model="thalamus", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    received = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
    assert "cut off" in caught.value.message
    assert "".join(received).startswith("a rather")
    assert Message.objects.get(role="assistant").status == Message.Status.FAILED


def test_a_request_without_a_user_message_is_a_400(client_for, user):
    with pytest.raises(openai.BadRequestError) as caught:
        client_for(user).chat.completions.create(
            model="thalamus", messages=[{"role": "system", "content": "be nice"}]
        )
    assert caught.value.body["param"] == "messages"
    assert not Conversation.objects.exists()


def test_an_invalid_body_is_a_400(client_for, user):
    client = client_for(user)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="thalamus", messages=[{"role": "wizard", "content": "hi"}]
        )
    assert caught.value.body["param"] == "messages.0.role"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="thalamus", messages=[])
    response = httpx.post(
        f"{client.base_url}chat/completions",
        content=b"{not json",
        headers={"Authorization": f"Bearer {client.api_key}"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_a_busy_conversation_is_a_409(client_for, user, llm_stub):
    conversation = conversation_create(user=user)
    message_send(conversation=conversation, content="first")
    with pytest.raises(openai.ConflictError):
        _ask(client_for(user), "second", extra_headers={HEADER: str(conversation.pk)})
    assert conversation.messages.count() == 2
    assert _chat_requests(llm_stub) == []


def test_a_message_over_the_size_limit_is_a_400_and_nothing_is_kept(client_for, user, llm_stub):
    with pytest.raises(openai.BadRequestError) as caught:
        _ask(client_for(user), "z" * 32_001)
    assert caught.value.body == {
        "message": "Your message is 32,001 characters long; the limit is 32,000.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "invalid_request",
    }
    assert not Conversation.objects.exists() and not Message.objects.exists()
    assert _chat_requests(llm_stub) == []


def test_too_many_turns_a_minute_are_a_429_with_retry_after(client_for, user, llm_stub):
    runtime_config_save(config=RuntimeConfig(turns_per_minute=1))
    llm_stub.script({"content": "first answer"})
    client = client_for(user)
    _ask(client, "first")
    with pytest.raises(openai.RateLimitError) as caught:
        _ask(client, "second")
    assert caught.value.status_code == 429
    assert caught.value.body["type"] == "rate_limit_error"
    assert caught.value.body["code"] == "rate_limit_exceeded"
    assert caught.value.body["param"] is None
    assert caught.value.body["message"].startswith(
        "You are sending messages too fast: at most 1 per minute. Try again in "
    )
    assert 1 <= int(caught.value.response.headers["Retry-After"]) <= 60
    assert list(Message.objects.filter(role="user").values_list("content", flat=True)) == ["first"]
    assert Conversation.objects.count() == 1


def test_a_streamed_reply_arrives_token_by_token_not_all_at_the_end(client_for, user, llm_stub):
    # 2.4 s of tokens: a stall of a loaded machine before the first still leaves them apart.
    llm_stub.script({"content": "word " * 25, "tps": 10})
    client = client_for(user)
    started = time.monotonic()
    arrivals = [
        time.monotonic() - started
        for chunk in client.chat.completions.create(
            model="thalamus", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        if chunk.choices and chunk.choices[0].delta.content
    ]
    assert len(arrivals) == 25
    assert arrivals[-1] - arrivals[0] > 1.0


def test_the_api_is_served_without_the_sites_middleware_and_keeps_its_security_headers(
    asgi_server, user
):
    """/v1 has a lean handler of its own (no session, CSRF, login or lockout middleware): the
    site's answer to an anonymous caller would be a redirect to the login page, the API's is its
    own 401; the headers every response carries are still there, and an unknown /v1 path is a
    plain 404, not an error from a page that expects a signed-in user."""
    _, secret = api_key_create(user=user, name="tests")
    listed = httpx.get(f"{asgi_server}/v1/models", headers={"Authorization": f"Bearer {secret}"})
    assert listed.status_code == 200
    assert "sessionid" not in listed.headers.get("set-cookie", "")
    assert "csrftoken" not in listed.headers.get("set-cookie", "")
    assert listed.headers["X-Content-Type-Options"] == "nosniff"
    assert listed.headers["X-Frame-Options"] == "DENY"
    assert listed.headers["Referrer-Policy"] == "same-origin"
    assert "default-src 'self'" in listed.headers["Content-Security-Policy"]
    missing = httpx.get(f"{asgi_server}/v1/nothing-here")
    assert missing.status_code == 404
    assert missing.headers["X-Content-Type-Options"] == "nosniff"


def test_calls_share_the_servers_redis_connections_instead_of_opening_one_each(asgi_server, user):
    """Django keeps its cache objects per request context under ASGI; ours share one pool per
    process, so a hundred calls do not open a hundred connections to Redis."""
    from django.core.cache import cache

    redis = cache._cache.get_client(write=True)
    _, secret = api_key_create(user=user, name="tests")
    headers = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=asgi_server, headers=headers) as http:
        assert http.get("/v1/models").status_code == 200  # the server's pool is warm
        before = redis.info("stats")["total_connections_received"]
        for _ in range(100):
            assert http.get("/v1/models").status_code == 200
        opened = redis.info("stats")["total_connections_received"] - before
    # Other test processes share this Redis and open a few connections of their own meanwhile.
    assert opened < 20, f"{opened} Redis connections opened for 100 calls"


def test_the_chat_pages_stop_ends_an_answer_written_for_the_api(client_for, user, llm_stub, client):
    """The conversation is on the chat page too: its Stop (here sent from this process, as
    another web process would) ends the answer the API streams, which ends normally, its text
    so far saved as cancelled."""
    llm_stub.script({"content": "word " * 40, "tps": 8})
    stream = client_for(user).chat.completions.create(
        model="thalamus", messages=[{"role": "user", "content": "Talk to me."}], stream=True
    )
    words = []
    finish = []
    for chunk in stream:
        if not chunk.choices:
            continue
        if chunk.choices[0].delta.content:
            words += chunk.choices[0].delta.content.split()
            if len(words) == 2:
                reply = Message.objects.get(role="assistant")
                client.force_login(user)
                stopped = client.post(f"/c/{reply.conversation_id}/stop", {"message_id": reply.pk})
                assert stopped.status_code == 302
        if chunk.choices[0].finish_reason:
            finish.append(chunk.choices[0].finish_reason)

    assert 2 <= len(words) < 40
    assert finish == ["stop"]
    reply = Message.objects.get(role="assistant")
    assert reply.status == Message.Status.CANCELLED
    assert reply.content.split() == words
