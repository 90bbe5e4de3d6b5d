"""The stub's tool calling: scripted calls, streamed or whole, and a server without tools."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest
from openai import OpenAI

from llm_stub import StubServer

USER = [{"role": "user", "content": "what do you remember about my cat?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "memory_query",
            "description": "Search the user's memories.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
]


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(port=0) as server:
        yield server


@pytest.fixture
def client(stub: StubServer) -> Iterator[OpenAI]:
    with OpenAI(base_url=stub.url, api_key="x", max_retries=0, timeout=10) as c:
        yield c


def test_a_scripted_tool_call_comes_back_as_an_openai_tool_call(stub, client) -> None:
    stub.script(
        {
            "tool_calls": [
                {"name": "memory_query", "arguments": {"query": "cat"}},
                {"name": "current_time"},
            ]
        }
    )

    response = client.chat.completions.create(model="qwen2.5:7b", messages=USER, tools=TOOLS)

    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    first, second = choice.message.tool_calls
    assert first.type == "function" and first.id.startswith("call_")
    assert first.id != second.id
    assert first.function.name == "memory_query"
    assert json.loads(first.function.arguments) == {"query": "cat"}
    assert (second.function.name, second.function.arguments) == ("current_time", "{}")
    assert stub.requests[0]["body"]["tools"] == TOOLS


def test_streamed_tool_calls_assemble_into_the_scripted_calls(stub, client) -> None:
    stub.script({"tool_calls": [{"name": "memory_query", "arguments": {"query": "my cat"}}]})

    stream = client.chat.completions.create(
        model="qwen2.5:7b", messages=USER, tools=TOOLS, stream=True
    )
    calls: dict[int, dict] = {}
    finish_reason = None
    for chunk in stream:
        choice = chunk.choices[0]
        finish_reason = choice.finish_reason or finish_reason
        for part in choice.delta.tool_calls or []:
            call = calls.setdefault(part.index, {"id": None, "name": "", "arguments": ""})
            call["id"] = part.id or call["id"]
            call["name"] += part.function.name or ""
            call["arguments"] += part.function.arguments or ""

    assert finish_reason == "tool_calls"
    assert list(calls) == [0]
    assert calls[0]["id"].startswith("call_")
    assert calls[0]["name"] == "memory_query"
    assert json.loads(calls[0]["arguments"]) == {"query": "my cat"}


def test_raw_string_arguments_are_sent_as_they_are_to_script_broken_json(stub, client) -> None:
    stub.script({"tool_calls": [{"name": "calculator", "arguments": '{"expression": "2+'}]})

    response = client.chat.completions.create(model="qwen2.5:7b", messages=USER, tools=TOOLS)

    assert response.choices[0].message.tool_calls[0].function.arguments == '{"expression": "2+'


def test_an_unscripted_request_with_tools_answers_in_plain_text(stub, client) -> None:
    response = client.chat.completions.create(model="qwen2.5:7b", messages=USER, tools=TOOLS)

    choice = response.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.tool_calls is None
    assert choice.message.content.startswith("Stub reply to:")


def test_a_server_without_tools_refuses_them_as_llama_cpp_does_without_jinja(stub, client) -> None:
    stub.set_defaults(tools=False)

    with pytest.raises(openai.InternalServerError) as refused:
        client.chat.completions.create(model="qwen2.5:7b", messages=USER, tools=TOOLS)
    assert "tools param requires --jinja flag" in str(refused.value)

    plain = client.chat.completions.create(model="qwen2.5:7b", messages=USER)
    assert plain.choices[0].message.content.startswith("Stub reply to:")


def test_a_malformed_tool_call_script_is_refused_when_scripted(stub) -> None:
    with pytest.raises(ValueError, match="'name'"):
        stub.script({"tool_calls": [{"arguments": {}}]})
    with pytest.raises(ValueError, match="non-empty"):
        stub.script({"tool_calls": []})
