"""The stub as a reasoning model: its thinking as llama.cpp, Ollama or a raw model send it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI

from llm_stub import DEFAULT_SETTINGS, StubServer

THOUGHT = "The user greets me, so I should greet them back."
REPLY = "Hello to you too!"
USER = [{"role": "user", "content": "hello"}]


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(port=0) as server:
        yield server


@pytest.fixture
def client(stub: StubServer) -> Iterator[OpenAI]:
    with OpenAI(base_url=stub.url, api_key="x", max_retries=0, timeout=10) as c:
        yield c


def complete(client: OpenAI, **kw: Any) -> Any:
    return client.chat.completions.create(model="qwen3:8b", messages=USER, **kw)  # type: ignore[arg-type]


def stream(client: OpenAI, **kw: Any) -> tuple[list[tuple[str, str]], str | None, Any]:
    """The streamed pieces in order as (field, text), the finish reason and the usage."""
    pieces: list[tuple[str, str]] = []
    finish_reason = usage = None
    chunks = complete(client, stream=True, stream_options={"include_usage": True}, **kw)
    for chunk in chunks:
        usage = chunk.usage or usage
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        finish_reason = choice.finish_reason or finish_reason
        for field, text in (choice.delta.model_extra or {}).items():
            pieces.append((field, text))
        if choice.delta.content:
            pieces.append(("content", choice.delta.content))
    return pieces, finish_reason, usage


def joined(pieces: list[tuple[str, str]], field: str) -> str:
    return "".join(text for name, text in pieces if name == field)


def test_llama_cpps_default_sends_the_thinking_as_reasoning_content(
    stub: StubServer, client: OpenAI
) -> None:
    stub.script({"reasoning": THOUGHT, "content": REPLY}, REPLY)

    thinking = complete(client)
    plain = complete(client)

    message = thinking.choices[0].message
    assert message.content == REPLY
    assert message.model_extra == {"reasoning_content": THOUGHT}
    assert thinking.choices[0].finish_reason == "stop"
    assert thinking.usage.completion_tokens == len(THOUGHT.split()) + len(REPLY.split())
    assert plain.choices[0].message.model_extra == {}
    assert stub.defaults["reasoning_format"] == "deepseek"


def test_a_streamed_thinking_comes_as_reasoning_content_deltas_before_the_content(
    stub: StubServer, client: OpenAI
) -> None:
    stub.script({"reasoning": THOUGHT, "content": REPLY})

    pieces, finish_reason, usage = stream(client)

    fields = [field for field, _ in pieces]
    thought_count = len(THOUGHT.split())
    assert fields == ["reasoning_content"] * thought_count + ["content"] * len(REPLY.split())
    assert joined(pieces, "reasoning_content") == THOUGHT
    assert joined(pieces, "content") == REPLY
    assert finish_reason == "stop"
    assert usage.completion_tokens == thought_count + len(REPLY.split())


def test_ollama_names_the_thinking_reasoning(stub: StubServer, client: OpenAI) -> None:
    stub.set_defaults(reasoning_format="ollama")
    stub.script({"reasoning": THOUGHT, "content": REPLY}, {"reasoning": THOUGHT, "content": REPLY})

    message = complete(client).choices[0].message
    pieces, _, _ = stream(client)

    assert (message.content, message.model_extra) == (REPLY, {"reasoning": THOUGHT})
    assert {field for field, _ in pieces} == {"reasoning", "content"}
    assert joined(pieces, "reasoning") == THOUGHT
    assert joined(pieces, "content") == REPLY


def test_without_a_reasoning_format_the_thinking_stays_inline_in_think_tags(
    stub: StubServer, client: OpenAI
) -> None:
    stub.set_defaults(reasoning_format="none")
    stub.script({"reasoning": THOUGHT, "content": REPLY}, {"reasoning": THOUGHT, "content": REPLY})

    message = complete(client).choices[0].message
    pieces, _, usage = stream(client)

    inline = f"<think>\n{THOUGHT}\n</think>\n\n{REPLY}"
    assert (message.content, message.model_extra) == (inline, {})
    assert {field for field, _ in pieces} == {"content"}
    assert joined(pieces, "content") == inline
    assert usage.completion_tokens == len(inline.split())


@pytest.mark.parametrize("streamed", [False, True])
def test_a_thinking_that_uses_all_of_max_tokens_leaves_an_empty_reply(
    stub: StubServer, client: OpenAI, streamed: bool
) -> None:
    stub.script({"reasoning": THOUGHT, "content": REPLY})

    if streamed:
        pieces, finish_reason, usage = stream(client, max_tokens=4)
        thought, content = joined(pieces, "reasoning_content"), joined(pieces, "content")
    else:
        response = complete(client, max_tokens=4)
        message, finish_reason, usage = (
            response.choices[0].message,
            response.choices[0].finish_reason,
            response.usage,
        )
        thought, content = message.model_extra["reasoning_content"], message.content

    assert thought == "The user greets me,"
    assert content == ""
    assert finish_reason == "length"
    assert usage.completion_tokens == 4
    assert stub.requests[0]["completion_tokens"] == 4


def test_max_tokens_cuts_the_reply_by_what_the_thinking_left(
    stub: StubServer, client: OpenAI
) -> None:
    stub.script({"reasoning": "Short thought.", "content": "one two three four five"})

    response = complete(client, max_tokens=4)

    message = response.choices[0].message
    assert message.model_extra == {"reasoning_content": "Short thought."}
    assert message.content == "one two"
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 4


def test_max_tokens_cuts_an_inline_thinking_before_it_closes(
    stub: StubServer, client: OpenAI
) -> None:
    stub.set_defaults(reasoning_format="none")
    stub.script({"reasoning": THOUGHT, "content": REPLY})

    response = complete(client, max_tokens=3)

    assert response.choices[0].message.content == "<think>\nThe user"
    assert response.choices[0].finish_reason == "length"


def test_the_thinking_streams_at_the_set_tokens_per_second(
    stub: StubServer, client: OpenAI
) -> None:
    stub.script({"reasoning": "a b c d e", "content": "f g h i j", "tps": 20})

    started = time.monotonic()
    pieces, _, _ = stream(client)
    elapsed = time.monotonic() - started

    assert len(pieces) == 10
    assert 9 / 20 - 0.05 <= elapsed < 2  # 9 gaps of 1/20 s after the first thought


def test_the_reasoning_format_is_set_over_http_and_checked(stub: StubServer) -> None:
    with httpx.Client(base_url=stub.root_url, timeout=5) as http:
        answer = http.post("/_stub/defaults", json={"reasoning_format": "ollama"})
        assert answer.status_code == 200
        assert answer.json()["defaults"]["reasoning_format"] == "ollama"

        bad = http.post("/_stub/defaults", json={"reasoning_format": "harmony"})
        assert bad.status_code == 400
        assert "reasoning_format" in bad.json()["error"]["message"]

        scripted = http.post("/_stub/script", json={"reasoning": ["not", "a", "string"]})
        assert scripted.status_code == 400
        assert "reasoning" in scripted.json()["error"]["message"]

        http.post("/_stub/reset")
    assert stub.defaults == DEFAULT_SETTINGS
    with pytest.raises(ValueError):
        stub.set_defaults(reasoning_format=None)
