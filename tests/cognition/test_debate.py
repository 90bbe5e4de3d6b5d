"""The internal debate (CLAM §4): draft, antagonistic review against the user's rules, rewrite."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition.pipeline import answer_saved_reply
from apps.core.models import Event, RuntimeConfig
from apps.core.services import runtime_config_save
from apps.memory import services as memory_services
from tests.chat.conftest import connect_socket

pytestmark = pytest.mark.django_db(transaction=True)

REVIEWER = "antagonistic reviewer"
REWRITE = "A reviewer found"


def review(verdict: str, violations=(), critique: str = "") -> dict:
    return {
        "json": {"violations": list(violations), "verdict": verdict, "critique": critique},
        "match": REVIEWER,
    }


def _configure(user, *, debate: bool, rule: str | None = "Always answer in Italian") -> None:
    runtime_config_save(config=RuntimeConfig(debate_enabled=debate, turns_per_minute=0))
    if rule:
        memory_services.memory_node_create(
            owner=user, description=rule, kind="rule", source="user", quote=rule, embed=False
        )


def _set_up(user, **configure) -> Message:
    _configure(user, **configure)
    conversation = Conversation.objects.create(owner=user)
    return services.message_send(conversation=conversation, content="What is the capital?").reply


async def _answer(user, **set_up) -> Message:
    reply = await sync_to_async(_set_up)(user, **set_up)
    async for _ in answer_saved_reply(reply_id=reply.pk):
        pass
    return await Message.objects.aget(pk=reply.pk)


def _chat_requests(llm_stub) -> list[dict]:
    return [r["body"] for r in llm_stub.requests if r["path"] == "/v1/chat/completions"]


async def test_with_the_debate_off_the_answer_is_one_streamed_call(user, llm_stub):
    llm_stub.script({"content": "Paris."})
    reply = await _answer(user, debate=False)
    assert (reply.status, reply.content) == ("complete", "Paris.")
    (call,) = _chat_requests(llm_stub)
    assert call["stream"] is True
    assert "debate" not in reply.trace
    assert not await Event.objects.filter(kind=Event.Kind.DEBATE).aexists()


async def test_a_draft_that_breaks_no_rule_is_sent_as_it_is_with_its_review(user, llm_stub):
    llm_stub.script({"content": "Parigi è la capitale."}, review("ok"))
    reply = await _answer(user, debate=True)
    assert (reply.status, reply.content) == ("complete", "Parigi è la capitale.")
    draft, reviewed = _chat_requests(llm_stub)
    assert draft["max_tokens"] == reply.trace["limits"]["max_tokens"]
    assert "max_tokens" in reviewed
    prompt = reviewed["messages"][-1]["content"]
    assert "Always answer in Italian" in prompt and "Parigi è la capitale." in prompt
    debate = reply.trace["debate"]
    assert debate["review"] == {"violations": [], "verdict": "ok", "critique": ""}
    assert debate["rewritten"] is False and debate["draft"] == "Parigi è la capitale."
    assert {"draft", "review"} <= set(debate["timings_ms"])
    assert reply.completion_tokens == 4  # the draft's words


async def test_a_draft_that_breaks_a_rule_is_rewritten_and_the_dashboard_hears_of_it(
    user, llm_stub
):
    llm_stub.script(
        {"content": "Paris is the capital."},
        review("rewrite", ["It is in English; the user wants Italian."], "Answer in Italian."),
        {"content": "La capitale è Parigi.", "match": REWRITE},
    )
    reply = await _answer(user, debate=True)
    assert (reply.status, reply.content) == ("complete", "La capitale è Parigi.")
    *_, rewrite = _chat_requests(llm_stub)
    assert (
        rewrite["stream"] is True and rewrite["max_tokens"] == reply.trace["limits"]["max_tokens"]
    )
    assert rewrite["messages"][-2] == {"role": "assistant", "content": "Paris is the capital."}
    assert "Answer in Italian." in rewrite["messages"][-1]["content"]
    debate = reply.trace["debate"]
    assert debate["rewritten"] is True and debate["review"]["verdict"] == "rewrite"
    assert debate["draft"] == "Paris is the capital." and "rewrite" in debate["timings_ms"]
    event = await Event.objects.aget(kind=Event.Kind.DEBATE)
    assert event.owner_id == user.pk and event.payload["rewritten"] is True
    assert event.payload["message_id"] == reply.pk
    assert "the user wants Italian" in event.summary
    page = await sync_to_async(_dashboard)(user)
    assert "Internal debate" in page and "the user wants Italian" in page


def _dashboard(user) -> str:
    client = Client()
    client.force_login(user)
    return client.get(reverse("dashboard:mine")).content.decode()


@pytest.mark.parametrize(
    "failure",
    [
        [{"content": "I think it is fine!", "match": REVIEWER}] * 2,  # and so is the repair
        [{"fault": "http_500", "match": REVIEWER}],
    ],
    ids=["garbage", "http_error"],
)
async def test_a_review_that_fails_lets_the_draft_through_with_the_error(user, llm_stub, failure):
    llm_stub.script({"content": "Paris."}, *failure)
    reply = await _answer(user, debate=True)
    assert (reply.status, reply.content, reply.error) == ("complete", "Paris.", "")
    debate = reply.trace["debate"]
    assert debate["error"].startswith("the review failed") and debate["rewritten"] is False
    assert "review" not in debate
    event = await Event.objects.aget(kind=Event.Kind.DEBATE)
    assert "unreviewed" in event.summary and event.payload["error"]


async def test_with_no_rules_or_preferences_the_answer_streams_as_usual(user, llm_stub):
    llm_stub.script({"content": "Paris."})
    reply = await _answer(user, debate=True, rule=None)
    assert reply.content == "Paris." and len(_chat_requests(llm_stub)) == 1
    assert reply.trace["debate"] == {"skipped": "no rules or preferences to hold the draft to"}


async def test_a_stop_during_the_review_ends_the_reply_cancelled(user, llm_stub):
    llm_stub.script({"content": "Paris."}, {**review("ok"), "ttft": 3})
    reply = await sync_to_async(_set_up)(user, debate=True)

    async def consume():
        async for _ in answer_saved_reply(reply_id=reply.pk):
            pass

    task = asyncio.ensure_future(consume())
    await sync_to_async(llm_stub.wait_for_requests)(3)  # embedding, draft, review
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await reply.arefresh_from_db()
    assert (reply.status, reply.content) == ("cancelled", "")
    assert reply.trace["debate"]["cancelled"] is True


async def test_the_page_shows_the_review_before_the_answer(user, llm_stub):
    llm_stub.script(
        {"content": "Paris is the capital."},
        {**review("rewrite", ["English"], "Italian, please."), "ttft": 0.3},
        {"content": "La capitale è Parigi, in Francia.", "match": REWRITE, "tps": 20},
    )
    await sync_to_async(_configure)(user, debate=True)
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    await communicator.send_to(text_data=json.dumps({"content": "What is the capital?"}))
    frames = []
    async with asyncio.timeout(15):
        while "msg-assistant complete" not in (frames[-1] if frames else ""):
            frames.append(await communicator.receive_from(15))
    reviewing = next(i for i, f in enumerate(frames) if "Reviewing the draft…" in f)
    answered = next(i for i, f in enumerate(frames) if 'class="md-src"' in f and ">La" in f)
    assert reviewing < answered
    assert "Thalamus is answering" in "".join(frames[:reviewing])  # the composer is locked
    assert not any("Paris is the capital" in f for f in frames), "the draft was shown"
    assert '-status" role="status" hidden' in frames[answered], "the status stayed"
    await communicator.disconnect()
