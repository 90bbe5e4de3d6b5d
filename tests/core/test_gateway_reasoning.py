"""A reasoning model's thinking never reaches a reply, whichever way its server sends it."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from pydantic import BaseModel

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition.answer import AnswerFailed
from apps.cognition.pipeline import answer_saved_reply
from apps.core.llm import gateway
from apps.core.llm.limits import REFLECTION, TITLE, model_limits
from apps.core.llm.reasoning import REASONING_ALLOWANCE, ThinkSplitter, split_reasoning
from apps.core.llm.structured import complete_as
from apps.core.models import RuntimeConfig
from apps.core.services import runtime_config_save

# llama.cpp's reasoning_content, Ollama's reasoning, and a raw model's inline <think>.
FORMATS = ["deepseek", "ollama", "none"]
THOUGHT = "The user says hi, so greet back."
HI = [{"role": "user", "content": "hi"}]


class Greeting(BaseModel):
    text: str
    friendly: bool


def _assert_no_thinking(text: str) -> None:
    assert "greet back" not in text and "<think>" not in text and "</think>" not in text


@pytest.mark.django_db
@pytest.mark.parametrize("reasoning_format", FORMATS)
def test_a_background_reply_comes_without_its_thinking_which_is_kept_apart(
    llm_stub, reasoning_format
):
    llm_stub.set_defaults(reasoning_format=reasoning_format)
    llm_stub.script({"reasoning": THOUGHT, "content": "Hello there"})

    reply = gateway.complete(role=TITLE, prompt=HI)

    assert reply.content == "Hello there"
    _assert_no_thinking(reply.content)
    assert reply.reasoning.strip() == THOUGHT


@pytest.mark.django_db
@pytest.mark.parametrize("reasoning_format", FORMATS)
def test_a_structured_reply_after_thinking_parses(llm_stub, reasoning_format):
    llm_stub.set_defaults(reasoning_format=reasoning_format)
    llm_stub.script({"reasoning": THOUGHT, "json": {"text": "Hello", "friendly": True}})

    greeting = complete_as(Greeting, role=REFLECTION, prompt=HI)

    assert greeting == Greeting(text="Hello", friendly=True)
    # Parsed at the first try: no repair call was needed.
    asked = [r for r in llm_stub.requests if r["path"] == "/v1/chat/completions"]
    assert len(asked) == 1


@pytest.mark.django_db
@pytest.mark.parametrize("reasoning_format", FORMATS)
def test_a_model_seen_thinking_gets_the_reasoning_allowance_on_its_reply_cap(
    llm_stub, reasoning_format
):
    llm_stub.set_defaults(reasoning_format=reasoning_format)
    before = model_limits(REFLECTION)
    llm_stub.script({"reasoning": THOUGHT, "content": "Hello there"})

    gateway.complete(role=REFLECTION, prompt=HI)

    after = model_limits(REFLECTION)
    assert after.reply_cap == min(before.reply_cap + REASONING_ALLOWANCE, before.context // 2)
    assert after.reply_cap > before.reply_cap


@pytest.mark.django_db
def test_a_model_never_seen_thinking_keeps_its_reply_cap(llm_stub):
    before = model_limits(REFLECTION)
    llm_stub.script({"content": "Hello there"})

    gateway.complete(role=REFLECTION, prompt=HI)

    assert model_limits(REFLECTION).reply_cap == before.reply_cap


def _ask(user) -> Message:
    runtime_config_save(config=RuntimeConfig(turns_per_minute=0))
    conversation = Conversation.objects.create(owner=user)
    return services.message_send(conversation=conversation, content="Where is Rome?").reply


async def _answer(user) -> Message:
    reply = await sync_to_async(_ask)(user)
    try:
        async for _ in answer_saved_reply(reply_id=reply.pk):
            pass
    except AnswerFailed:
        pass
    return await Message.objects.aget(pk=reply.pk)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("reasoning_format", FORMATS)
async def test_the_chat_answer_saves_its_thinking_in_the_trace_not_the_reply(
    user, llm_stub, reasoning_format
):
    llm_stub.set_defaults(reasoning_format=reasoning_format)
    llm_stub.script({"reasoning": THOUGHT, "content": "Rome is in Italy."})

    reply = await _answer(user)

    assert reply.status == Message.Status.COMPLETE
    assert reply.content == "Rome is in Italy."
    _assert_no_thinking(reply.content)
    assert reply.trace["reasoning"].strip() == THOUGHT


@pytest.mark.parametrize(
    ("text", "reasoning", "reply"),
    [
        # The blank line after the thinking arrives as tokens of its own.
        (
            "<think>\nThe user says hi.\n</think>\n\nHello there!",
            "\nThe user says hi.\n",
            "Hello there!",
        ),
        ("  <think>Short.</think>Hello there!", "Short.", "Hello there!"),
        ("Hello there! No <think> here.", "", "Hello there! No <think> here."),
        ("<think>\nA thought that never ends", "\nA thought that never ends", ""),
    ],
)
def test_the_splitter_separates_a_reply_cut_into_single_characters(text, reasoning, reply):
    splitter = ThinkSplitter()
    parts = [splitter.feed(char) for char in text] + [splitter.flush()]

    assert "".join(thought for thought, _ in parts) == reasoning
    assert "".join(said for _, said in parts) == reply
    assert split_reasoning(text) == (reasoning, reply)
