"""Thalamus against a real llama.cpp server with a real small model, over real HTTP: the judge
of normal behaviour (the stub stays for the faults a real server cannot be made to show)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from pydantic import BaseModel, Field

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition.answer import AnswerFailed
from apps.cognition.pipeline import answer_saved_reply
from apps.core.llm import gateway
from apps.core.llm.fitting import bodies, template_prompt
from apps.core.llm.limits import CHAT, REFLECTION, TITLE, model_limits
from apps.core.llm.outcomes import TooLong
from apps.core.llm.structured import complete_as
from bench._llama import MODEL_NAME

pytestmark = [pytest.mark.real_llm, pytest.mark.django_db(transaction=True)]


class Person(BaseModel):
    """A small, bounded shape: what a small model can finish."""

    name: str = Field(max_length=60)
    city: str = Field(max_length=60)


def _send(user, text: str) -> Message:
    conversation = Conversation.objects.create(owner=user)
    return services.message_send(conversation=conversation, content=text).reply


async def _answer(user, text: str) -> Message:
    reply = await sync_to_async(_send)(user, text)
    try:
        async for _ in answer_saved_reply(reply_id=reply.pk):
            pass
    except AnswerFailed:
        pass
    return await Message.objects.aget(pk=reply.pk)


def test_the_window_is_read_from_the_servers_props(on_real_llm, real_llm):
    on_real_llm()

    limits = model_limits(CHAT)

    assert (limits.context, limits.server) == (4096, "llama.cpp")
    assert limits.source == "llama.cpp /props"


async def test_a_chat_turn_streams_from_the_real_model(user, on_real_llm):
    await sync_to_async(on_real_llm)(answer_max_tokens=48, reflection_enabled=False)

    reply = await _answer(user, "Say hello to me in one short sentence.")

    assert reply.status == Message.Status.COMPLETE, reply.error
    assert reply.content.strip() and reply.model == MODEL_NAME
    # The server's own count of the prompt: the real chat template's tokens, not our estimate.
    assert 0 < reply.prompt_tokens <= 4096 - 48
    assert 0 < reply.completion_tokens <= 48
    assert reply.ttft_ms is not None and reply.ttft_ms <= reply.latency_ms


def test_a_structured_call_parses_the_real_models_grammar_bound_json(on_real_llm, real_llm):
    on_real_llm(background_max_tokens=120)
    said = "My name is Laura Bianchi and I live in Turin."

    person = complete_as(
        Person,
        role=REFLECTION,
        prompt=[
            {
                "role": "user",
                "content": f"Who is speaking and where do they live? Message: {said}",
            }
        ],
    )

    assert isinstance(person, Person) and person.name.strip() and person.city.strip()


def test_a_prompt_over_the_window_is_never_sent(on_real_llm, real_llm):
    on_real_llm()
    before = real_llm.metric("prompt_tokens_total")
    # About 10,000 tokens, fixed: nothing in it may shrink.
    huge = [{"role": "user", "content": "the window is small " * 2500}]

    with pytest.raises(TooLong):
        gateway.complete(role=TITLE, prompt=huge)

    assert real_llm.metric("prompt_tokens_total") == before


def test_a_long_prompt_that_may_shrink_is_fitted_and_the_server_takes_it(
    on_real_llm, small_real_llm
):
    # The smaller window: the fitting is the same, and the server reads a quarter of the tokens
    # (on a loaded 2-core run a 4,000-token prompt took over a minute).
    on_real_llm(llm_base_url=small_real_llm.url)
    prompt = template_prompt("title", slots={"exchange": bodies(["a long story " * 3000])})

    reply = gateway.complete(role=TITLE, prompt=prompt, max_tokens=16)

    limits = model_limits(TITLE)
    assert reply.prompt_tokens <= limits.context - limits.reply_cap
    assert "characters left out" in reply.messages[0]["content"]


async def test_a_fallback_with_a_smaller_window_gets_a_prompt_fitted_to_it(
    user, on_real_llm, real_llm, small_real_llm
):
    # The chat's own server is down; the fallback has a quarter of its window.
    dead = "http://127.0.0.1:9/v1"
    await sync_to_async(on_real_llm)(
        llm_base_url=dead,
        answer_max_tokens=32,
        reflection_enabled=False,
        model_fallbacks={"chat": [f"{small_real_llm.url} {MODEL_NAME}"]},
    )
    conversation = await Conversation.objects.acreate(owner=user)
    # An earlier exchange far longer than the fallback's window.
    for index in range(6):
        await Message.objects.acreate(
            conversation=conversation,
            role="user" if index % 2 == 0 else "assistant",
            content=f"turn {index}: " + "the history goes on and on " * 120,
            status=Message.Status.COMPLETE,
        )
    reply = await sync_to_async(services.message_send)(
        conversation=conversation, content="What did I say first?"
    )
    try:
        async for _ in answer_saved_reply(reply_id=reply.reply.pk):
            pass
    except AnswerFailed:
        pass
    saved = await Message.objects.aget(pk=reply.reply.pk)

    assert saved.status == Message.Status.COMPLETE, saved.error
    assert saved.trace["answered_by"]["base_url"] == small_real_llm.url
    assert saved.trace["limits"]["context"] == 1024
    # The server's own count: the prompt fits the fallback's window, not the primary's budget.
    assert saved.prompt_tokens <= 1024 - 32
    assert saved.trace["history_dropped"] > 0


async def test_a_statement_about_the_user_is_answered_with_no_llm_call_before_it(
    user, on_real_llm, real_llm
):
    await sync_to_async(on_real_llm)(answer_max_tokens=24, reflection_enabled=False)
    before = real_llm.metric("prompt_tokens_total")

    reply = await _answer(user, "My daughter Sofia is allergic to peanuts, so I cook without them.")

    assert reply.status == Message.Status.COMPLETE, reply.error
    assert reply.trace["route"]["by"] == "rule" and "tools" not in reply.trace
    # The server read one prompt: the answer's.
    assert real_llm.metric("prompt_tokens_total") - before <= reply.prompt_tokens
