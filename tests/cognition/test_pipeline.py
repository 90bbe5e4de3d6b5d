"""The turn's pipeline: every router choice, the steps as spans, the evidence and the world
state in the prompt, and the status line the chat page is shown."""

from __future__ import annotations

import asyncio
import json

import pytest

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.chat.turn_status import final_parts
from apps.cognition.pipeline import prepare_saved_reply
from apps.cognition.route import ANSWER, GATHER, WORLD, route_by_rule
from apps.cognition.world import WORLD_QUEUED
from apps.memory.models import WorldState
from apps.memory.world_services import world_apply
from tests.chat.conftest import connect_socket
from tests.spotlight import unmarked

pytestmark = pytest.mark.django_db


def _reply(user, text: str, conversation: Conversation | None = None) -> Message:
    conversation = conversation or Conversation.objects.create(owner=user)
    return services.message_send(conversation=conversation, content=text).reply


def _chat_requests(llm_stub) -> list[dict]:
    return [r for r in llm_stub.requests if r["path"].endswith("/chat/completions")]


def _schema_of(request: dict) -> str | None:
    response_format = request["body"].get("response_format") or {}
    return (response_format.get("json_schema") or {}).get("name")


@pytest.mark.parametrize(
    ("text", "has_history", "route"),
    [
        ("Hi there!", False, ANSWER),
        ("thanks", True, ANSWER),
        ("and the second one?", True, ANSWER),
        ("What is the capital of France?", False, ANSWER),
        ("What is 17 * 23?", False, GATHER),
        ("what time is it in my town", False, GATHER),
        ("Do you remember what I said about my sister?", False, GATHER),
        ("From now on answer me in French, please.", False, WORLD),
        ("I'm working on a garden shed these weeks", False, WORLD),
    ],
)
def test_the_rule_routes_what_it_can_place_without_a_call(text, has_history, route):
    decided = route_by_rule(text, has_history=has_history)

    assert decided is not None and decided.route == route and decided.by == "rule"


def test_a_personal_message_the_rule_cannot_place_is_left_to_the_model():
    assert (
        route_by_rule("I wonder whether my sister would like the blue one", has_history=False)
        is None
    )


def test_a_greeting_takes_the_fast_track_with_no_llm_call_before_the_answer(user, llm_stub):
    reply = _reply(user, "Hello!")

    turn = prepare_saved_reply(reply_id=reply.pk)

    assert turn.trace["route"] == {
        "route": "answer",
        "reason": "a greeting or an acknowledgement",
        "by": "rule",
    }
    assert _chat_requests(llm_stub) == [], "the fast track asks the LLM nothing before the answer"
    spans = {span["name"]: span for span in turn.spans.as_trace()}
    assert list(spans) == ["route", "recall", "tools", "world", "assemble"]
    assert spans["tools"]["outcome"] == spans["world"]["outcome"] == "skipped"
    assert all(span["ms"] >= 0 and span["start_ms"] >= 0 for span in spans.values())


def test_a_personal_message_no_rule_places_asks_no_model_before_the_answer(user, llm_stub):
    # The shipped default: the router's model is off.
    reply = _reply(user, "I wonder whether my sister would like the blue one")

    turn = prepare_saved_reply(reply_id=reply.pk)

    assert turn.trace["route"] == {
        "route": "answer",
        "reason": "a personal message: answered directly with what memory holds",
        "by": "rule",
    }
    assert not [r for r in llm_stub.requests if r["path"].endswith("/chat/completions")]


def test_with_the_router_model_on_a_personal_message_still_asks_nothing_before_the_answer(
    user, llm_stub, config
):
    config(router_model_enabled=True)
    reply = _reply(user, "I wonder whether my sister would like the blue one")

    turn = prepare_saved_reply(reply_id=reply.pk)

    assert turn.trace["route"]["by"] == "rule" and turn.trace["route"]["route"] == "answer"
    assert _chat_requests(llm_stub) == []


def test_a_retry_of_a_world_turn_never_changes_the_world_state_again(user, llm_stub):
    reply = _reply(user, "I'm working on the garden shed now")

    turn = prepare_saved_reply(reply_id=reply.pk)

    assert turn.trace["route"]["route"] == "world"
    assert WORLD_QUEUED not in turn.trace
    assert {s["name"]: s.get("detail") for s in turn.spans.as_trace()}["world"] == "not on a retry"
    assert _chat_requests(llm_stub) == []


def test_the_world_state_written_by_hand_is_in_every_answers_system_prompt(user, llm_stub):
    world_apply(
        user_id=user.pk,
        ops=[{"op": "set", "path": "project", "value": "a cedar garden shed"}],
        source="browser",
    )
    reply = _reply(user, "Hello!")

    turn = prepare_saved_reply(reply_id=reply.pk)

    assert "a cedar garden shed" in turn.messages[0]["content"]


def _world_reply(ops: list[dict]) -> dict:
    return {"json": {"ops": ops, "reason": "the user said so"}}


async def _turn_over_socket(user, conversation, text: str) -> list[str]:
    communicator = await connect_socket(user, conversation.pk)
    await communicator.send_to(text_data=json.dumps({"action": "send", "content": text}))
    frames = []
    async with asyncio.timeout(20):
        while True:
            frame = await communicator.receive_from(20)
            frames.append(frame)
            if "msg-assistant complete" in frame or "msg-assistant failed" in frame:
                break
    await communicator.disconnect()
    return frames


async def _world_recorded(reply: Message) -> dict:
    """What the world modifier recorded in the reply's trace, once it has (background work)."""
    async with asyncio.timeout(45):
        while "applied" not in (reply.trace.get("world") or {}):
            await asyncio.sleep(0.1)
            await reply.arefresh_from_db()
    return reply.trace["world"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("text", "op", "stored"),
    [
        (
            "could you answer in bullet points from now on?",
            {"op": "append", "path": "behaviour", "value": "answer in bullet points"},
            ("behaviour", ["answer in bullet points"]),
        ),
        (
            "I'm working on the garden shed now",
            {"op": "set", "path": "project", "value": "the garden shed"},
            ("project", "the garden shed"),
        ),
    ],
    ids=["a preference", "a world-state change"],
)
async def test_a_world_turn_asks_the_llm_nothing_before_its_answer_and_changes_the_state_after(
    user, llm_stub, celery_worker, text, op, stored
):
    conversation = await Conversation.objects.acreate(owner=user)
    llm_stub.script(
        {"content": "Noted.", "match": "You are Thalamus"},
        _world_reply([op, {"op": "set", "path": "password", "value": "hunter2"}])
        | {"schema": "WorldOps"},
    )

    frames = await _turn_over_socket(user, conversation, text)

    reply = await Message.objects.aget(role="assistant")
    assert reply.status == Message.Status.COMPLETE and reply.content == "Noted."
    world = await _world_recorded(reply)
    state = await WorldState.objects.aget(owner=user)
    path, value = stored
    assert getattr(state, path) == value and state.version == 1
    asked = [_schema_of(request) for request in _chat_requests(llm_stub)]
    assert asked.index("WorldOps") > 0, "the world modifier was asked after the answer"
    answer = _chat_requests(llm_stub)[0]["body"]
    assert "response_format" not in answer and text in answer["messages"][-1]["content"]
    assert [applied["path"] for applied in world["applied"]] == [path]
    assert len(world["rejected"]) == 1 and world["rejected"][0]["reason"]
    assert asked.count("WorldOps") == 1
    spans = {span["name"]: span for span in reply.trace["spans"]}
    assert spans["world"]["detail"] == "after the answer"
    assert any(f'id="msg-{reply.pk}-turn"' in frame for frame in frames)


def test_the_next_turn_answers_with_the_changed_world_state(user, llm_stub):
    world_apply(
        user_id=user.pk,
        ops=[{"op": "append", "path": "behaviour", "value": "answer in bullet points"}],
        source="turn",
    )
    conversation = Conversation.objects.create(owner=user)

    turn = prepare_saved_reply(reply_id=_reply(user, "What is a shed?", conversation).pk)

    # What the model proposed is data: the message's memory note holds it, datamarked.
    assert "answer in bullet points" not in turn.messages[0]["content"]
    assert "answer in bullet points" in unmarked(turn.messages[-1]["content"])


@pytest.mark.django_db(transaction=True)
async def test_a_turn_records_every_step_as_a_span_and_shows_a_status_line(user, llm_stub):
    conversation = await Conversation.objects.acreate(owner=user)
    llm_stub.script({"content": "Hello to you too."})

    frames = await _turn_over_socket(user, conversation, "Hello!")

    reply = await Message.objects.select_related("conversation").aget(role="assistant")
    spans = reply.trace["spans"]
    assert [span["name"] for span in spans] == [
        "recall",
        "route",
        "tools",
        "world",
        "assemble",
        "answer",
    ]
    answer = spans[-1]
    assert answer["outcome"] == "ok" and answer["detail"] == reply.model
    opening = next(frame for frame in frames if f'id="msg-{reply.pk}-turn"' in frame)
    assert "turn started" in opening, "the opening carries the live status line"
    final = frames[-1]
    assert 'data-subsystem="router"' in final and "answer (rule)" in final
    assert 'data-subsystem="llm"' in final and 'data-subsystem="reflection"' in final
    parts = {part.name: part for part in final_parts(reply)}
    assert parts["retrieval"].state == "ok"
    assert parts["reflection"].text == "queued"


@pytest.mark.django_db(transaction=True)
async def test_a_failing_answer_shows_its_error_in_the_status_line(user, llm_stub):
    conversation = await Conversation.objects.acreate(owner=user)
    llm_stub.script({"fault": "http_500"})

    frames = await _turn_over_socket(user, conversation, "Hello!")

    reply = await Message.objects.aget(role="assistant")
    assert reply.status == Message.Status.FAILED
    assert reply.trace["spans"][-1]["name"] == "answer"
    assert reply.trace["spans"][-1]["outcome"] == "error"
    llm = {part.name: part for part in final_parts(reply)}["llm"]
    assert llm.state == "error" and "HTTP 500" in llm.text
    assert 'class="turn-part turn-error" data-subsystem="llm"' in frames[-1]
