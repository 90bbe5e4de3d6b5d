"""The context builder's tools, called directly: what each finds, and only for its own user."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.cognition.tools import (
    TOOLS,
    CalculatorArgs,
    ChatHistoryArgs,
    Evidence,
    ToolContext,
    ToolError,
    calculate,
)
from apps.core.selectors import runtime_config
from apps.memory import episode_services, graph_services
from apps.memory import services as memory_services

pytestmark = pytest.mark.django_db


def context_for(user, conversation, *, before=None, time_zone="Europe/Rome") -> ToolContext:
    return ToolContext(
        user_id=user.pk,
        conversation_id=conversation.pk,
        before_message_id=before,
        time_zone=time_zone,
        config=runtime_config(),
    )


def run(name: str, context: ToolContext, **arguments) -> list[Evidence]:
    tool = TOOLS[name]
    return tool.run(context, tool.args.model_validate(arguments))


# -------------------------------------------------------------------------- calculator


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 + 2", 4),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("(1 + 2) * -3", -9),
        ("2 ** 10", 1024),
        ("2 ** -1", 0.5),
        ("1.5e3 + 0.25", 1500.25),
        ("9 ** 9", 387420489),
    ],
)
def test_the_calculator_works_out_arithmetic(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize(
    ("expression", "refusal"),
    [
        ("__import__('os').system('true')", "function calls are not allowed"),
        ("abs(-1)", "function calls are not allowed"),
        ("x + 1", "names are not allowed"),
        ("().__class__", "Attribute is not allowed"),
        ("'a' * 3", "only numbers"),
        ("True + 1", "only numbers"),
        ("9 ** 9 ** 9", "too large"),
        ("10 ** 100000", "too large"),
        ("2.0 ** 5000", "too large"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("(-8) ** 0.5", "not a real number"),
        ("1 << 3", "LShift is not allowed"),
        ("[1, 2]", "List is not allowed"),
        ("2 +", "not an arithmetic expression"),
        ("1; 2", "not an arithmetic expression"),
    ],
)
def test_the_calculator_refuses_what_is_not_plain_arithmetic(expression, refusal):
    with pytest.raises(ToolError, match=refusal.replace("(", r"\(")):
        calculate(expression)


def test_a_calculation_is_evidence_with_its_expression(user):
    conversation = Conversation.objects.create(owner=user)

    [evidence] = run("calculator", context_for(user, conversation), expression=" 12 * 12 ")

    assert evidence.kind == "calculation"
    assert evidence.text == "12 * 12 = 144"
    assert evidence.ref is None


def test_an_over_long_expression_breaks_the_calculators_schema():
    with pytest.raises(ValueError, match="at most 200 characters"):
        CalculatorArgs.model_validate({"expression": "1+" * 150 + "1"})


# ------------------------------------------------------------------------ current_time


def test_the_current_time_is_told_in_the_users_time_zone(user):
    conversation = Conversation.objects.create(owner=user)

    [evidence] = run("current_time", context_for(user, conversation, time_zone="Asia/Tokyo"))

    assert evidence.kind == "time"
    assert evidence.at.utcoffset() == timedelta(hours=9)
    assert abs(evidence.at - timezone.now()) < timedelta(seconds=5)
    assert "in Asia/Tokyo (UTC+09:00)" in evidence.text
    assert f"{evidence.at:%H:%M}" in evidence.text


def test_an_unknown_time_zone_is_a_tool_error(user):
    conversation = Conversation.objects.create(owner=user)

    with pytest.raises(ToolError, match="unknown time zone 'Mars/Olympus'"):
        run("current_time", context_for(user, conversation, time_zone="Mars/Olympus"))


# --------------------------------------------------------------------------- searches


def test_memory_query_finds_the_users_memory(user, llm_stub):
    conversation = Conversation.objects.create(owner=user)
    cat = memory_services.memory_node_create(
        owner=user, description="My cat is called Miso", source="admin"
    )
    memory_services.memory_node_create(
        owner=user, description="I work as a nurse in Turin", source="admin"
    )

    found = run("memory_query", context_for(user, conversation), query="what is my cat called")

    assert found[0].ref == f"memory:{cat.pk}"
    assert found[0].kind == "memory"
    assert found[0].text == "My cat is called Miso"
    assert found[0].score > found[-1].score or len(found) == 1


def test_episode_search_finds_what_happened(user, llm_stub):
    conversation = Conversation.objects.create(owner=user)
    episode = episode_services.episode_create(
        owner=user, summary="We planned the trip to Lisbon", lesson="Book trains early"
    )

    [found] = run("episode_search", context_for(user, conversation), query="Lisbon trip")

    assert found.ref == f"episode:{episode.pk}"
    assert found.text == "We planned the trip to Lisbon Lesson: Book trains early"


def test_graph_query_matches_subject_relation_or_value(user):
    conversation = Conversation.objects.create(owner=user)
    city = graph_services.triple_upsert(
        owner=user, subject="user", predicate="lives_in", object="Rome"
    )
    graph_services.triple_upsert(owner=user, subject="user", predicate="likes", object="honey")
    context = context_for(user, conversation)

    # The fact sharing the most words with the query comes first.
    where = run("graph_query", context, query="Where does the user live")
    assert [e.ref for e in where][0] == f"triple:{city.pk}"
    assert [e.text for e in run("graph_query", context, query="rome")] == ["user — lives in: Rome"]
    assert len(run("graph_query", context)) == 2


def test_chat_history_tail_reads_the_latest_messages_before_the_question(user):
    conversation = Conversation.objects.create(owner=user)
    said = [
        Message.objects.create(conversation=conversation, role=role, content=f"line {index}")
        for index, role in enumerate(["user", "assistant"] * 13)
    ]
    Message.objects.create(
        conversation=conversation, role="assistant", content="broken", status="failed"
    )
    question = Message.objects.create(conversation=conversation, role="user", content="now?")
    context = context_for(user, conversation, before=question.pk)

    tail = run("chat_history_tail", context, limit=3)

    assert [e.text for e in tail] == ["assistant: line 23", "user: line 24", "assistant: line 25"]
    assert tail[-1].ref == f"message:{said[-1].pk}"
    assert len(run("chat_history_tail", context, limit=20)) == 20
    with pytest.raises(ValueError, match="less than or equal to 20"):
        ChatHistoryArgs.model_validate({"limit": 21})


# -------------------------------------------------------------------------- isolation


def test_no_tool_shows_one_user_what_another_user_has(user, other_user, llm_stub):
    alices = Conversation.objects.create(owner=user)
    Message.objects.create(conversation=alices, role="user", content="My cat is called Miso")
    cat = memory_services.memory_node_create(
        owner=user, description="My cat is called Miso", source="admin"
    )
    episode = episode_services.episode_create(owner=user, summary="Miso went to the vet")
    graph_services.triple_upsert(owner=user, subject="Miso", predicate="is_a", object="cat")
    mallorys = Conversation.objects.create(owner=other_user)
    Message.objects.create(conversation=mallorys, role="user", content="hello")

    mallory = context_for(other_user, mallorys)
    found = [
        *run("memory_query", mallory, query=f"Miso cat memory:{cat.pk}", limit=10),
        *run("episode_search", mallory, query=f"Miso vet episode:{episode.pk}", limit=5),
        *run("graph_query", mallory, query="Miso cat"),
        *run("chat_history_tail", mallory, limit=20),
    ]
    # Even a context naming Alice's conversation (which the pipeline never builds) reads none of it.
    forged = run("chat_history_tail", context_for(other_user, alices), limit=20)

    assert all("Miso" not in evidence.text for evidence in found)
    assert [evidence.text for evidence in found] == ["user: hello"]
    assert forged == []


def test_every_tool_offers_its_arguments_as_a_json_schema():
    for name, tool in TOOLS.items():
        function = tool.as_openai()["function"]
        assert function["name"] == name
        assert function["parameters"]["type"] == "object"
        assert function["description"]
    assert set(TOOLS) == {
        "memory_query",
        "episode_search",
        "graph_query",
        "chat_history_tail",
        "current_time",
        "calculator",
    }
