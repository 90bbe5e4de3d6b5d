"""The context builder's tool loop against the stub: every path a weak local model can take.

Transactional: the tools run on pool threads with their own database connections, which must
see what a test wrote.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest
from django.db import connection

from apps.chat.models import Conversation, Message
from apps.cognition import tools as tool_module
from apps.cognition.toolloop import gather_evidence
from apps.cognition.tools import TOOLS, Tool, ToolContext
from apps.core.llm.clients import ToolsRefused, outcome_of
from apps.core.selectors import runtime_config
from apps.memory import episode_services, graph_services
from apps.memory import services as memory_services
from apps.memory.models import MemoryNode

# A tool that calls out (the embedder) inside a transaction fails the test.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("no_outbound_in_atomic"),
]

ALL = list(TOOLS)
QUESTION = "What is my cat called?"


def calls(*names_and_arguments) -> dict:
    """A scripted reply calling tools: calls(("memory_query", {"query": "cat"}), ...)."""
    return {
        "tool_calls": [
            {"name": name, "arguments": arguments} for name, arguments in names_and_arguments
        ]
    }


def action(name: str, arguments: dict | None = None) -> dict:
    """A scripted ReAct reply, with the chatter small models put around their JSON."""
    step = {"thought": "I should look.", "action": name, "input": arguments or {}}
    return {"content": f"Sure! {json.dumps(step)} Hope that helps."}


def chat_requests(llm_stub) -> list[dict]:
    return [
        entry["body"] for entry in llm_stub.requests if entry["path"].endswith("/chat/completions")
    ]


def gather(user, conversation, *, allowed=ALL, question=QUESTION, time_zone="Europe/Rome"):
    config = runtime_config()
    context = ToolContext(
        user_id=user.pk,
        conversation_id=conversation.pk,
        before_message_id=None,
        time_zone=time_zone,
        config=config,
    )
    return gather_evidence(
        context=context, question=question, history=[], allowed=allowed, config=config
    )


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user)


def test_the_model_finds_the_users_memory_with_a_tool_then_answers(user, conversation, llm_stub):
    cat = memory_services.memory_node_create(
        owner=user, description="My cat is called Miso", source="admin"
    )
    llm_stub.script(calls(("memory_query", {"query": "cat name"})), {"content": "done"})

    result = gather(user, conversation, allowed=["memory_query", "calculator"])

    assert (result.mode, result.rounds, result.stopped) == ("tools", 2, "answered")
    assert [(e.ref, e.text) for e in result.evidence] == [
        (f"memory:{cat.pk}", "My cat is called Miso")
    ]
    [call] = result.calls
    assert call["tool"] == "memory_query" and call["outcome"] == "ok"
    assert call["arguments"] == {"query": "cat name"} and call["round"] == 1
    first, second = chat_requests(llm_stub)
    assert [tool["function"]["name"] for tool in first["tools"]] == ["memory_query", "calculator"]
    assert first["max_tokens"] == 256 and first["stream"] is False
    assert first["messages"][-1] == {"role": "user", "content": QUESTION}
    asked, answered = second["messages"][-2:]
    assert asked["role"] == "assistant" and asked["tool_calls"][0]["function"]["name"] == (
        "memory_query"
    )
    assert answered["role"] == "tool" and answered["tool_call_id"] == asked["tool_calls"][0]["id"]
    assert f"[memory:{cat.pk}] My cat is called Miso" in answered["content"]


def test_invalid_arguments_are_observations_and_the_loop_goes_on(
    user, conversation, llm_stub, config
):
    config(tool_rounds=4)
    llm_stub.script(
        {"tool_calls": [{"name": "calculator", "arguments": '{"expression": "2+'}]},
        calls(("memory_query", {"query": "cat", "limit": 99}), ("calculator", {"expr": "2+2"})),
        calls(("calculator", {"expression": "2+2"})),
        {"content": "done"},
    )

    result = gather(user, conversation)

    assert [(call["round"], call["outcome"]) for call in result.calls] == [
        (1, "invalid"),
        (2, "invalid"),
        (2, "invalid"),
        (3, "ok"),
    ]
    assert [e.text for e in result.evidence] == ["2+2 = 4"]
    assert result.stopped == "answered"
    requests = chat_requests(llm_stub)
    bad_json = requests[1]["messages"][-1]
    assert bad_json["role"] == "tool"
    assert bad_json["content"].startswith("the arguments of calculator are not valid JSON")
    too_many, wrong_name = requests[2]["messages"][-2:]
    assert (
        "invalid arguments for memory_query: limit: Input should be less than or equal to 10"
        in (too_many["content"])
    )
    assert "expression: Field required" in wrong_name["content"]


def test_a_tool_that_takes_too_long_is_left_behind(
    user, conversation, llm_stub, config, monkeypatch
):
    config(tool_timeout_seconds=0.2)
    release = threading.Event()

    def stuck(context, args):
        release.wait(10)
        return []

    monkeypatch.setitem(
        TOOLS, "current_time", Tool("current_time", "Stuck.", tool_module.CurrentTimeArgs, stuck)
    )
    llm_stub.script(calls(("current_time", {}), ("calculator", {"expression": "6*7"})), "done")

    try:
        result = gather(user, conversation)
    finally:
        release.set()

    slow, quick = result.calls
    assert slow["outcome"] == "timeout" and 150 <= slow["ms"] < 2000
    assert quick["outcome"] == "ok"
    assert [e.text for e in result.evidence] == ["6*7 = 42"]
    observation = chat_requests(llm_stub)[1]["messages"][-2]
    assert observation["content"] == "current_time did not answer within 0.2 s"


def test_a_tool_that_takes_too_long_is_stopped_and_its_work_does_not_go_on(
    user, conversation, llm_stub, config, monkeypatch
):
    config(tool_timeout_seconds=0.3)
    steps = []

    def slow_then_writes(context, args):
        # 20 steps of 0.1 s, then a write: 2 s of work the loop stops waiting for at 0.3 s.
        with connection.cursor() as cursor:
            for step in range(20):
                cursor.execute("SELECT pg_sleep(0.1)")
                steps.append(step)
        memory_services.memory_node_create(
            owner=user, description="written after the time-out", source="admin"
        )
        return []

    def one_long_query(context, args):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(30)")
        return []

    monkeypatch.setitem(
        TOOLS,
        "current_time",
        Tool("current_time", "Slow.", tool_module.CurrentTimeArgs, slow_then_writes),
    )
    monkeypatch.setitem(
        TOOLS,
        "chat_history_tail",
        Tool("chat_history_tail", "Slower.", tool_module.ChatHistoryArgs, one_long_query),
    )
    llm_stub.script(calls(("current_time", {}), ("chat_history_tail", {})), "done")

    result = gather(user, conversation)

    assert [call["outcome"] for call in result.calls] == ["timeout", "timeout"]
    # Longer than the slow tool would have taken: its steps stopped at the deadline.
    time.sleep(2.5)
    assert len(steps) <= 3
    assert not MemoryNode.objects.filter(owner=user).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND query LIKE 'SELECT pg_sleep%%' AND state = 'active'"
        )
        assert cursor.fetchone()[0] == 0


def test_the_loop_stops_at_the_round_cap(user, conversation, llm_stub, config):
    config(tool_rounds=2)
    llm_stub.script(
        calls(("calculator", {"expression": "1+1"})),
        calls(("calculator", {"expression": "2+2"})),
        calls(("calculator", {"expression": "3+3"})),
    )

    result = gather(user, conversation)

    assert (result.rounds, result.stopped) == (2, "round cap")
    assert [e.text for e in result.evidence] == ["1+1 = 2", "2+2 = 4"]
    assert len(chat_requests(llm_stub)) == 2
    assert len(llm_stub.pending) == 1


def test_no_rounds_means_no_llm_call(user, conversation, llm_stub, config):
    config(tool_rounds=0)

    result = gather(user, conversation)

    assert (result.evidence, result.calls, result.rounds) == ([], [], 0)
    assert result.stopped == "no rounds"
    assert llm_stub.requests == []


def test_a_tool_off_the_allowlist_is_not_run(user, conversation, llm_stub):
    memory_services.memory_node_create(
        owner=user, description="My cat is called Miso", source="admin"
    )
    llm_stub.script(calls(("memory_query", {"query": "cat"})), "done")

    result = gather(user, conversation, allowed=["calculator", "current_time"])

    assert result.evidence == []
    [call] = result.calls
    assert call["outcome"] == "not allowed"
    first, second = chat_requests(llm_stub)
    assert [tool["function"]["name"] for tool in first["tools"]] == ["calculator", "current_time"]
    assert second["messages"][-1]["content"] == (
        "tool memory_query is not available here (only: calculator, current_time)"
    )


def test_the_same_results_twice_are_one_piece_of_evidence(user, conversation, llm_stub):
    memory_services.memory_node_create(
        owner=user, description="My cat is called Miso", source="admin"
    )
    llm_stub.script(
        calls(("memory_query", {"query": "cat"}), ("memory_query", {"query": "Miso"})), "done"
    )

    result = gather(user, conversation)

    assert [call["outcome"] for call in result.calls] == ["ok", "ok"]
    assert [e.text for e in result.evidence] == ["My cat is called Miso"]


def test_a_model_without_tool_calling_gets_the_loop_in_text_and_it_is_remembered(
    user, conversation, llm_stub
):
    cat = memory_services.memory_node_create(
        owner=user, description="My cat is called Miso", source="admin"
    )
    llm_stub.set_defaults(tools=False)
    llm_stub.script(action("memory_query", {"query": "cat"}), action("final"))

    result = gather(user, conversation)

    assert (result.mode, result.rounds, result.stopped) == ("react", 2, "answered")
    assert [e.ref for e in result.evidence] == [f"memory:{cat.pk}"]
    refused, first, second = chat_requests(llm_stub)
    assert "tools" in refused
    assert "tools" not in first and "tools" not in second
    assert '"action"' in first["messages"][0]["content"]
    assert "- memory_query:" in first["messages"][0]["content"]
    assert second["messages"][-2]["content"].startswith('{"thought"')
    assert second["messages"][-1] == {
        "role": "user",
        "content": f"Observation: - [memory:{cat.pk}] My cat is called Miso"
        f" ({cat.created_at:%Y-%m-%d})",
    }

    llm_stub.script(action("calculator", {"expression": "3*3"}), "The answer is nine.")
    again = gather(user, conversation)

    assert again.mode == "react" and again.stopped == "answered"
    assert [e.text for e in again.evidence] == ["3*3 = 9"]
    assert all("tools" not in body for body in chat_requests(llm_stub)[3:])


def test_a_react_reply_that_is_not_an_action_is_an_observation(
    user, conversation, llm_stub, config
):
    config(tool_rounds=4)
    llm_stub.set_defaults(tools=False)
    llm_stub.script(
        {"content": '{"thought": "hmm"}'},
        action("memory_query", {"limit": "many"}),
        action("weather", {"city": "Rome"}),
        action("final"),
    )

    result = gather(user, conversation)

    assert [call["outcome"] for call in result.calls] == ["invalid", "invalid", "not allowed"]
    assert result.stopped == "answered"
    observations = [body["messages"][-1]["content"] for body in chat_requests(llm_stub)[2:]]
    assert observations[0].startswith("Observation: that reply is not an action: action: Field")
    assert "query: Field required" in observations[1]
    assert "tool weather is not available here" in observations[2]


def test_an_llm_error_ends_the_loop_with_what_was_gathered(user, conversation, llm_stub):
    llm_stub.script(calls(("calculator", {"expression": "2**5"})), {"fault": "http_500"})

    result = gather(user, conversation)

    assert result.stopped == "llm error: HTTP 500 from the chat model: Scripted stub failure"
    assert [e.text for e in result.evidence] == ["2**5 = 32"]
    assert result.rounds == 1


def test_an_llm_that_does_not_answer_in_time_ends_the_loop(user, conversation, llm_stub, config):
    config(router_timeout_seconds=1)
    llm_stub.script({"fault": "hang", "ttft": 3})

    result = gather(user, conversation)

    assert result.stopped == "llm error: the chat model did not answer within 1 s"
    assert result.evidence == [] and result.rounds == 0


def test_another_users_rows_stay_out_of_reach_whatever_the_model_asks(user, other_user, llm_stub):
    alices = Conversation.objects.create(owner=user)
    Message.objects.create(conversation=alices, role="user", content="My cat is called Miso")
    cat = memory_services.memory_node_create(
        owner=user, description="My cat is called Miso", source="admin"
    )
    vet = episode_services.episode_create(owner=user, summary="Miso went to the vet")
    graph_services.triple_upsert(owner=user, subject="Miso", predicate="is_a", object="cat")
    mallorys = Conversation.objects.create(owner=other_user)
    llm_stub.script(
        calls(
            ("memory_query", {"query": f"memory:{cat.pk} Miso cat", "limit": 10}),
            ("episode_search", {"query": f"episode:{vet.pk} Miso vet"}),
            ("graph_query", {"query": "Miso"}),
            ("chat_history_tail", {"limit": 20}),
        ),
        "done",
    )

    result = gather(other_user, mallorys)

    assert [call["outcome"] for call in result.calls] == ["ok"] * 4
    assert result.evidence == []
    observations = [message["content"] for message in chat_requests(llm_stub)[1]["messages"][-4:]]
    assert observations == ["nothing found"] * 4


def test_a_refusal_of_tool_calling_is_told_from_other_errors():
    cases = [
        (500, "tools param requires --jinja flag", True),
        (400, "registry.ollama.ai/library/gemma:2b does not support tools", True),
        (400, "Unsupported parameter: 'tool_choice'", True),
        (400, "request (5000 tokens) exceeds the available context size (4096 tokens)", False),
        (500, "Scripted stub failure", False),
        (429, "too many tools requests", False),
    ]
    request = httpx.Request("POST", "http://llm.invalid/v1/chat/completions")
    for status, message, refused in cases:
        response = httpx.Response(status, request=request, json={"error": {"message": message}})
        error = openai.APIStatusError(message, response=response, body={"message": message})
        refuses = isinstance(outcome_of(error, base_url="", model=""), ToolsRefused)
        assert refuses is refused, message


def test_every_round_fits_the_window_with_huge_messages(user, conversation, llm_stub, config):
    # A 4,096-token server that refuses a longer prompt, as llama.cpp does; messages of 32,000
    # characters, the most the chat box takes, and five rounds of observations.
    config(tool_rounds=5, context_tokens=4096)
    llm_stub.set_defaults(server="llamacpp", context=4096, overflow="reject")
    for index in range(5):
        memory_services.memory_node_create(
            owner=user,
            description=f"Fact {index}: " + "memory words " * 300,
            embed=False,
            source="admin",
        )
    llm_stub.script(*[calls(("memory_query", {"query": "fact"}))] * 5)
    huge = "w " * 16_000
    history = [
        {"role": "user" if index % 2 == 0 else "assistant", "content": huge} for index in range(10)
    ]
    config_now = runtime_config()
    context = ToolContext(
        user_id=user.pk,
        conversation_id=conversation.pk,
        before_message_id=None,
        time_zone="Europe/Rome",
        config=config_now,
    )

    result = gather_evidence(
        context=context, question=huge, history=history, allowed=ALL, config=config_now
    )

    assert (result.rounds, result.stopped) == (5, "round cap")
    requests = chat_requests(llm_stub)
    assert len(requests) == 5
    for body in requests:
        # The stub counts a token a word, as its window does; every round was taken.
        words = sum(len(str(m.get("content") or "").split()) for m in body["messages"])
        assert words < 4096 - body["max_tokens"]
        assert body["messages"][0]["role"] == "system"
    # Later rounds still carry the calls and their observations.
    assert sum(m["role"] == "tool" for m in requests[-1]["messages"]) == 4
