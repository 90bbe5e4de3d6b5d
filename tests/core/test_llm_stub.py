from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

import httpx
import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel

from llm_stub import DEFAULT_SETTINGS, StubServer, embed_text, schema_instance

REPO_ROOT = Path(__file__).resolve().parents[2]
USER = [{"role": "user", "content": "one two three"}]


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(port=0) as server:
        yield server


@pytest.fixture
def client(stub: StubServer) -> Iterator[OpenAI]:
    with OpenAI(base_url=stub.url, api_key="x", max_retries=0, timeout=10) as c:
        yield c


def ask(client: OpenAI, text: str, **kw: object) -> str:
    response = client.chat.completions.create(
        model="qwen2.5:7b", messages=[{"role": "user", "content": text}], **kw
    )
    return response.choices[0].message.content or ""


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# ---------------------------------------------------------------------------- chat


def test_models_lists_configured_models(client: OpenAI) -> None:
    ids = [m.id for m in client.models.list()]
    assert ids == ["qwen2.5:7b", "nomic-embed-text", "demo"]


def test_custom_models() -> None:
    with StubServer(models=["a", "b"]) as server:
        data = httpx.get(f"{server.url}/models").json()["data"]
    assert [m["id"] for m in data] == ["a", "b"]


def test_non_streaming_reply_and_usage(stub: StubServer, client: OpenAI) -> None:
    stub.script({"content": "hello there world again"})
    response = client.chat.completions.create(model="qwen2.5:7b", messages=USER)

    assert response.object == "chat.completion"
    assert response.model == "qwen2.5:7b"
    assert response.choices[0].message.role == "assistant"
    assert response.choices[0].message.content == "hello there world again"
    assert response.choices[0].finish_reason == "stop"
    assert response.usage is not None
    assert response.usage.prompt_tokens == 3
    assert response.usage.completion_tokens == 4
    assert response.usage.total_tokens == 7
    [logged] = stub.requests
    assert logged["path"] == "/v1/chat/completions"
    assert logged["body"] == {"model": "qwen2.5:7b", "messages": USER}
    assert logged["prompt_tokens"] == logged["prompt_tokens_used"] == 3
    assert logged["truncated"] is False
    assert logged["completion_tokens"] == 4
    assert logged["finish_reason"] == "stop"
    assert logged["max_tokens"] is None
    assert logged["slot_wait"] < 1


def test_streaming_assembles_scripted_content(stub: StubServer, client: OpenAI) -> None:
    text = "Streaming  works,\nwith whitespace kept. "
    stub.script(text)
    chunks = list(
        client.chat.completions.create(
            model="qwen2.5:7b",
            messages=USER,
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert "".join(pieces) == text
    assert len([p for p in pieces if p]) > 3
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finals] == ["stop"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 5
    assert chunks[-1].usage.prompt_tokens == 3


def test_streaming_without_usage_option_has_no_usage_chunk(
    stub: StubServer, client: OpenAI
) -> None:
    stub.script("a b c")
    chunks = list(client.chat.completions.create(model="m", messages=USER, stream=True))
    assert all(c.choices for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_streaming_pacing_and_ttft(stub: StubServer, client: OpenAI) -> None:
    stub.script({"content": " ".join(["tok"] * 11), "ttft": 0.2, "tps": 50})
    started = time.monotonic()
    stream = client.chat.completions.create(model="m", messages=USER, stream=True)
    first_content_at = None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content and first_content_at is None:
            first_content_at = time.monotonic() - started
    total = time.monotonic() - started
    assert first_content_at is not None and first_content_at >= 0.19
    # 11 tokens at 50 tok/s: 10 gaps of 20 ms after the first token.
    assert total >= 0.2 + 0.19
    assert total < 3


def test_match_routing(stub: StubServer, client: OpenAI) -> None:
    stub.script(
        {"match": "apple", "content": "A"},
        {"match": "banana", "content": "B"},
        {"content": "any"},
    )
    assert ask(client, "tell me about banana bread") == "B"
    # the unmatched "any" reply is consumed before "apple", which must wait for its match
    assert ask(client, "something else") == "any"
    assert ask(client, "an apple a day") == "A"
    assert stub.pending == []
    assert ask(client, "nothing scripted") == "Stub reply to: nothing scripted"


def test_match_uses_all_messages(stub: StubServer, client: OpenAI) -> None:
    stub.script({"match": "SYSTEM-MARK", "content": "matched system"})
    messages = [
        {"role": "system", "content": "SYSTEM-MARK rules"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ]
    response = client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
    assert response.choices[0].message.content == "matched system"


def test_json_reply_is_serialized(stub: StubServer, client: OpenAI) -> None:
    stub.script({"json": {"facts": ["x"], "n": 1}})
    assert json.loads(ask(client, "extract")) == {"facts": ["x"], "n": 1}


def test_default_reply_truncates_user_message(client: OpenAI) -> None:
    long = "word " * 100
    assert ask(client, long) == "Stub reply to: " + long[:200]


def test_demo_mode_reply() -> None:
    with (
        StubServer(demo=True) as server,
        OpenAI(base_url=server.url, api_key="x", max_retries=0) as c,
    ):
        reply = ask(c, "How do rainbows form after the storm?")
    assert "demo model" in reply
    assert "How do rainbows form after the storm?" in reply
    assert "\n- " in reply
    assert "```python\n" in reply
    assert "$e^{i\\pi}+1=0$" in reply


def test_demo_model_name_gets_demo_reply(client: OpenAI) -> None:
    response = client.chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "hello"}]
    )
    assert "demo model" in (response.choices[0].message.content or "")


# -------------------------------------------------------------------------- faults


def test_http_500_raises_internal_server_error(stub: StubServer, client: OpenAI) -> None:
    stub.script({"fault": "http_500"})
    with pytest.raises(openai.InternalServerError) as info:
        ask(client, "hi")
    assert info.value.status_code == 500
    assert ask(client, "hi again") == "Stub reply to: hi again"


def test_http_429_raises_rate_limit_error(stub: StubServer, client: OpenAI) -> None:
    stub.script({"fault": "http_429"})
    with pytest.raises(openai.RateLimitError):
        ask(client, "hi")


def test_drop_mid_stream_raises_after_partial_content(stub: StubServer, client: OpenAI) -> None:
    stub.script({"content": "one two three four five six seven eight", "fault": "drop"})
    received: list[str] = []
    with pytest.raises(openai.APIError):
        for chunk in client.chat.completions.create(model="m", messages=USER, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert "".join(received) == "one two three four "


def test_an_error_fault_can_carry_retry_after(stub: StubServer, client: OpenAI) -> None:
    stub.script({"fault": "http_429", "retry_after": 30}, {"fault": "http_500", "retry_after": 7})
    with pytest.raises(openai.RateLimitError) as limited:
        ask(client, "hi")
    with pytest.raises(openai.InternalServerError) as failed:
        ask(client, "hi")
    assert limited.value.response.headers["retry-after"] == "30"
    assert failed.value.response.headers["retry-after"] == "7"


def test_drop_done_sends_the_whole_answer_then_drops_before_done(
    stub: StubServer, client: OpenAI
) -> None:
    stub.script({"content": "one two three", "fault": "drop_done"})
    received: list[str] = []
    finish = None
    with pytest.raises(openai.APIConnectionError):
        for chunk in client.chat.completions.create(model="m", messages=USER, stream=True):
            if chunk.choices:
                received.append(chunk.choices[0].delta.content or "")
                finish = chunk.choices[0].finish_reason or finish
    assert ("".join(received), finish) == ("one two three", "stop")


def test_drop_non_streaming_closes_connection(stub: StubServer, client: OpenAI) -> None:
    stub.script({"fault": "drop"})
    with pytest.raises(openai.APIConnectionError):
        ask(client, "hi")
    assert ask(client, "still alive") == "Stub reply to: still alive"


def test_garbage_with_response_format_is_unparseable_json(stub: StubServer, client: OpenAI) -> None:
    stub.script({"json": {"answer": "forty two", "confidence": 0.5}, "fault": "garbage"})
    content = ask(client, "q", response_format={"type": "json_object"})
    assert content
    with pytest.raises(ValueError):
        json.loads(content)


def test_garbage_streaming_with_response_format(stub: StubServer, client: OpenAI) -> None:
    stub.script({"fault": "garbage"})
    chunks = client.chat.completions.create(
        model="m", messages=USER, stream=True, response_format={"type": "json_object"}
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    with pytest.raises(ValueError):
        json.loads(content)


def test_garbage_without_response_format_breaks_the_body(stub: StubServer) -> None:
    stub.script({"fault": "garbage"})
    response = httpx.post(
        f"{stub.url}/chat/completions", json={"model": "m", "messages": USER}, timeout=5
    )
    assert response.status_code == 200
    assert response.text == '{"choices": ['
    with pytest.raises(ValueError):
        response.json()


def test_hang_waits_for_ttft_then_replies(stub: StubServer, client: OpenAI) -> None:
    stub.script({"content": "late", "fault": "hang", "ttft": 0.3})
    started = time.monotonic()
    assert ask(client, "hi") == "late"
    assert time.monotonic() - started >= 0.29


def test_hang_times_out_client_and_stop_is_prompt() -> None:
    server = StubServer().start()
    server.set_defaults(fault="hang")
    with (
        OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=0.3) as c,
        pytest.raises(openai.APITimeoutError),
    ):
        ask(c, "hi")

    def hanging_request() -> None:
        with contextlib.suppress(httpx.HTTPError):  # stop() cuts it off, as intended
            httpx.post(f"{server.url}/chat/completions", json={"messages": USER}, timeout=10)

    # a second, still-hanging request must not delay stop()
    thread = threading.Thread(target=hanging_request, daemon=True)
    thread.start()
    server.wait_for_requests(2, timeout=5)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_defaults_apply_only_when_queue_has_no_match(stub: StubServer, client: OpenAI) -> None:
    stub.set_defaults(fault="http_500")
    assert stub.defaults["fault"] == "http_500"
    stub.script({"match": "special", "content": "ok"})
    with pytest.raises(openai.InternalServerError):
        ask(client, "ordinary")
    assert ask(client, "special request") == "ok"
    stub.reset()
    assert stub.defaults == DEFAULT_SETTINGS
    assert ask(client, "fine") == "Stub reply to: fine"


def test_invalid_replies_are_rejected(stub: StubServer) -> None:
    with pytest.raises(ValueError):
        stub.script({"fault": "explode"})
    with pytest.raises(ValueError):
        stub.script({"content": "x", "json": {}})
    with pytest.raises(ValueError):
        stub.script({"contnet": "typo"})
    with pytest.raises(ValueError):
        stub.set_defaults(latency=1)
    assert stub.pending == []


def test_wait_for_requests(stub: StubServer) -> None:
    with pytest.raises(TimeoutError):
        stub.wait_for_requests(1, timeout=0.05)
    threading.Timer(
        0.1, lambda: httpx.post(f"{stub.url}/embeddings", json={"input": "x"}, timeout=5)
    ).start()
    requests = stub.wait_for_requests(1, timeout=5)
    assert requests[0]["path"] == "/v1/embeddings"
    assert requests[0]["body"] == {"input": "x"}


def test_concurrent_streaming_clients(stub: StubServer) -> None:
    n = 25
    stub.script(
        *(
            {"match": f"client-{i}:", "content": f"reply for {i} " * 10, "tps": 200}
            for i in range(n)
        )
    )
    results: dict[int, str] = {}
    errors: list[BaseException] = []
    together = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            with OpenAI(base_url=stub.url, api_key="x", max_retries=0, timeout=20) as c:
                together.wait(timeout=20)
                stream = c.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": f"client-{i}: go"}],
                    stream=True,
                )
                results[i] = "".join(
                    ch.choices[0].delta.content or "" for ch in stream if ch.choices
                )
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    assert results == {i: f"reply for {i} " * 10 for i in range(n)}
    # Each reply streams for 0.2 s (40 tokens at 200 tok/s) and all are asked at once: they
    # stream side by side, not one after another. Counted by the server, not by a clock that
    # a loaded machine slows (25 clients' parsing is seconds of CPU there).
    assert stub.max_concurrent > 1


# ------------------------------------------------------------------- json schema


class Color(StrEnum):
    red = "red"
    green = "green"


class Address(BaseModel):
    street: str
    number: int


class Profile(BaseModel):
    name: str
    age: int
    score: float
    active: bool
    color: Color
    tags: list[str]
    address: Address
    nickname: str | None
    others: list[Address] = []
    note: str = "n/a"


def test_json_schema_default_instance_validates(client: OpenAI) -> None:
    content = ask(
        client,
        "make a profile",
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "Profile", "schema": Profile.model_json_schema()},
        },
    )
    profile = Profile.model_validate_json(content)
    assert profile.address == Address(street="", number=0)
    assert profile.color is Color.red
    assert profile.tags == []


def test_json_schema_via_parse_helper(client: OpenAI) -> None:
    completion = client.chat.completions.parse(
        model="qwen2.5:7b", messages=USER, response_format=Profile
    )
    assert isinstance(completion.choices[0].message.parsed, Profile)


def test_json_object_default_is_empty_object(client: OpenAI) -> None:
    assert ask(client, "q", response_format={"type": "json_object"}) == "{}"


def test_schema_instance_edge_cases() -> None:
    schema = {
        "$defs": {"Item": {"type": "object", "required": ["id"], "properties": {"id": {}}}},
        "type": "object",
        "required": ["items", "ref", "choice", "const", "bounded", "when", "merged", "nullable"],
        "properties": {
            "items": {"type": "array", "minItems": 2, "items": {"$ref": "#/$defs/Item"}},
            "ref": {"$ref": "#/$defs/Item"},
            "choice": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            "const": {"const": "fixed"},
            "bounded": {"type": "integer", "minimum": 3, "maximum": 9},
            "when": {"type": "string", "format": "date-time"},
            "merged": {"allOf": [{"$ref": "#/$defs/Item"}, {"required": ["extra"]}]},
            "nullable": {"type": ["null", "string"]},
        },
    }
    assert schema_instance(schema) == {
        "items": [{"id": None}, {"id": None}],
        "ref": {"id": None},
        "choice": 0,
        "const": "fixed",
        "bounded": 3,
        "when": "1970-01-01T00:00:00Z",
        "merged": {"id": None, "extra": None},
        "nullable": None,
    }


# ---------------------------------------------------------------------- embeddings


def test_embeddings_dimension_norm_and_determinism(stub: StubServer, client: OpenAI) -> None:
    first = client.embeddings.create(model="nomic-embed-text", input="The cat sat on the mat")
    vector = first.data[0].embedding
    assert len(vector) == stub.dim
    assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, rel_tol=1e-5)
    again = client.embeddings.create(model="nomic-embed-text", input="the CAT sat on the mat")
    assert again.data[0].embedding == vector
    floats = client.embeddings.create(
        model="nomic-embed-text", input="The cat sat on the mat", encoding_format="float"
    )
    assert floats.data[0].embedding == pytest.approx(vector, abs=1e-6)
    assert first.usage.prompt_tokens == 6


def test_embeddings_dimensions_and_list_input(client: OpenAI) -> None:
    response = client.embeddings.create(
        model="nomic-embed-text", input=["alpha", "beta", ""], dimensions=64
    )
    assert [d.index for d in response.data] == [0, 1, 2]
    for item in response.data:
        assert len(item.embedding) == 64
        assert math.isclose(math.sqrt(sum(v * v for v in item.embedding)), 1.0, rel_tol=1e-5)
    assert any(v != 0 for v in response.data[2].embedding)


def test_embeddings_similarity(client: OpenAI) -> None:
    texts = [
        "the quick brown fox jumps over the lazy dog",
        "a quick brown fox leaps over a sleepy dog",
        "quarterly revenue grew in european markets",
    ]
    response = client.embeddings.create(model="nomic-embed-text", input=texts, dimensions=768)
    a, b, c = (d.embedding for d in response.data)
    assert cosine(a, b) > 0.4
    assert abs(cosine(a, c)) < cosine(a, b) / 2
    assert abs(cosine(b, c)) < 0.2


@pytest.mark.parametrize(("env", "expected"), [(None, 768), ("32", 32)])
def test_embedding_dim_default_and_environment(
    monkeypatch: pytest.MonkeyPatch, env: str | None, expected: int
) -> None:
    if env is None:
        monkeypatch.delenv("THALAMUS_EMBED_DIM", raising=False)
    else:
        monkeypatch.setenv("THALAMUS_EMBED_DIM", env)
    with StubServer() as server:
        assert server.dim == expected
        body = httpx.post(
            f"{server.url}/embeddings", json={"input": "x", "encoding_format": "float"}, timeout=5
        ).json()
    assert len(body["data"][0]["embedding"]) == expected


def test_embeddings_stable_across_processes() -> None:
    code = "from llm_stub import embed_text; print(embed_text('hello stable world', 16))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert json.loads(out) == embed_text("hello stable world", 16)


def test_embeddings_can_be_scripted_to_fail(stub: StubServer, client: OpenAI) -> None:
    stub.script({"endpoint": "embeddings", "fault": "http_500"}, "chat reply")
    with pytest.raises(openai.InternalServerError):
        client.embeddings.create(model="nomic-embed-text", input="x")
    assert ask(client, "hi") == "chat reply"


# --------------------------------------------------------------- HTTP control API


def test_http_control_endpoints(stub: StubServer, client: OpenAI) -> None:
    root = stub.root_url
    with httpx.Client(base_url=root, timeout=5) as http:
        queued = http.post("/_stub/script", json=[{"content": "from afar"}, "second"])
        assert queued.status_code == 200
        assert queued.json() == {"queued": 2}
        assert [r.get("content") for r in http.get("/_stub/script").json()] == [
            "from afar",
            "second",
        ]
        assert ask(client, "hi") == "from afar"
        assert ask(client, "hi") == "second"

        requests = http.get("/_stub/requests").json()
        assert [r["path"] for r in requests] == ["/v1/chat/completions"] * 2

        defaults = http.post("/_stub/defaults", json={"fault": "http_429"})
        assert defaults.json()["defaults"]["fault"] == "http_429"
        with pytest.raises(openai.RateLimitError):
            ask(client, "hi")

        bad = http.post("/_stub/script", json=[{"fault": "nope"}])
        assert bad.status_code == 400
        assert "fault" in bad.json()["error"]["message"]

        assert http.post("/_stub/reset").json() == {"ok": True}
        assert http.get("/_stub/requests").json() == []
        assert ask(client, "hi") == "Stub reply to: hi"


def test_unknown_route_and_bad_json(stub: StubServer) -> None:
    with httpx.Client(base_url=stub.root_url, timeout=5) as http:
        assert http.get("/v1/nope").status_code == 404
        bad = http.post(
            "/v1/chat/completions",
            content=b"{not json",
            headers={"Content-Type": "application/json"},
        )
        assert bad.status_code == 400
        assert bad.json()["error"]["type"] == "invalid_request_error"
        # the kept-alive connection still works afterwards
        assert http.get("/v1/models").status_code == 200


# --------------------------------------------------------------------------- CLI


def test_cli_serves_and_exits_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "llm_stub", "--port", "0", "--dim", "8", "--demo"],
        cwd=REPO_ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        url = None
        deadline = time.monotonic() + 20
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            found = re.search(r"listening on (http://\S+/v1)", line)
            url = found.group(1) if found else None
        assert url, "stub did not report its URL"
        body = httpx.post(
            f"{url}/embeddings", json={"input": "x", "encoding_format": "float"}, timeout=5
        ).json()
        assert len(body["data"][0]["embedding"]) == 8
        assert "POST /v1/embeddings -> 200" in proc.stderr.readline()

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
