"""The chat's answer falls back along its chain before its first token, and says who answered."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition.answer import AnswerFailed
from apps.cognition.pipeline import answer_saved_reply
from apps.core.llm.limits import CHAT, Endpoint, model_limits
from apps.core.models import RuntimeConfig
from apps.core.services import runtime_config_save
from apps.memory import services as memory_services

pytestmark = pytest.mark.django_db(transaction=True)


def _ask(user, **config) -> Message:
    runtime_config_save(config=RuntimeConfig(turns_per_minute=0, **config))
    conversation = Conversation.objects.create(owner=user)
    return services.message_send(conversation=conversation, content="Where is Rome?").reply


async def _answer(user, **config) -> Message:
    reply = await sync_to_async(_ask)(user, **config)
    try:
        async for _ in answer_saved_reply(reply_id=reply.pk):
            pass
    except AnswerFailed:
        pass
    return await Message.objects.aget(pk=reply.pk)


def _chat_requests(llm_stub) -> list[dict]:
    return [r["body"] for r in llm_stub.requests if r["path"] == "/v1/chat/completions"]


async def test_a_missing_chat_model_falls_back_and_the_reply_says_which_answered(
    user, llm_stub, client
):
    llm_stub.set_defaults(missing_models=["qwen2.5:7b"])
    llm_stub.script({"content": "Rome is in Italy."})

    reply = await _answer(
        user, answer_max_tokens=900, model_fallbacks={"chat": ["demo"]}, context_tokens=4096
    )

    assert reply.status == Message.Status.COMPLETE and reply.content == "Rome is in Italy."
    assert reply.model == "demo"
    assert reply.trace["answered_by"] == {
        "model": "demo",
        "base_url": llm_stub.url,
        "fallback_from": [
            {
                "model": "qwen2.5:7b",
                "base_url": llm_stub.url,
                "error": 'HTTP 404: model "qwen2.5:7b" not found, try pulling it first',
            }
        ],
    }
    asked = _chat_requests(llm_stub)
    assert [body["model"] for body in asked] == ["qwen2.5:7b", "demo"]
    # The same prompt, with the fallback model's own reply cap.
    assert asked[1]["messages"] == asked[0]["messages"]
    limits = await sync_to_async(model_limits)(CHAT, None, Endpoint(llm_stub.url, "demo"))
    assert asked[1]["max_tokens"] == limits.reply_cap == 900

    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)(f"/c/{reply.conversation_id}/")).content.decode()
    assert "Answered by demo" in page
    assert "(fallback: qwen2.5:7b failed: HTTP 404: model &quot;qwen2.5:7b&quot; not found" in page


async def test_a_server_error_before_the_first_token_falls_back_in_the_chains_order(user, llm_stub):
    llm_stub.set_defaults(missing_models=["gone"])
    llm_stub.script({"fault": "http_500"}, {"content": "Rome is in Italy."})

    reply = await _answer(user, model_fallbacks={"chat": ["gone", "demo", "never-asked"]})

    assert (reply.status, reply.model) == (Message.Status.COMPLETE, "demo")
    assert [body["model"] for body in _chat_requests(llm_stub)] == ["qwen2.5:7b", "gone", "demo"]
    errors = [failed["error"] for failed in reply.trace["answered_by"]["fallback_from"]]
    assert errors[0].startswith("HTTP 500") and errors[1].startswith("HTTP 404")


async def test_an_answer_from_its_own_model_names_it_without_a_fallback(user, llm_stub, client):
    llm_stub.script({"content": "Rome is in Italy."})

    reply = await _answer(user, model_fallbacks={"chat": ["demo"]})

    assert reply.model == "qwen2.5:7b" and "answered_by" not in reply.trace
    assert [body["model"] for body in _chat_requests(llm_stub)] == ["qwen2.5:7b"]
    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)(f"/c/{reply.conversation_id}/")).content.decode()
    assert "Answered by qwen2.5:7b" in page and "(fallback:" not in page


async def test_when_every_model_of_the_chain_fails_the_reply_says_so_plainly(user, llm_stub):
    llm_stub.set_defaults(missing_models=["qwen2.5:7b", "demo"])

    reply = await _answer(user, model_fallbacks={"chat": ["demo"]})

    assert reply.status == Message.Status.FAILED
    assert reply.error == "The language model returned an error (HTTP 404)."
    assert [f["model"] for f in reply.trace["answered_by"]["fallback_from"]] == [
        "qwen2.5:7b",
        "demo",
    ]


async def test_a_prompt_too_long_for_every_model_is_sent_to_each_once_and_never_again(
    user, llm_stub
):
    llm_stub.set_defaults(context=10)

    reply = await _answer(user, model_fallbacks={"chat": ["demo"]})

    assert reply.status == Message.Status.FAILED
    # Each refusal states the server's window; no prompt is sent again over a known window.
    assert [body["model"] for body in _chat_requests(llm_stub)] == ["qwen2.5:7b", "demo"]
    assert "too long for the model" in reply.error


async def test_the_debates_draft_falls_back_too_and_the_rewrite_asks_the_same_model(user, llm_stub):
    await sync_to_async(memory_services.memory_node_create)(
        owner=user,
        description="Always answer in Italian",
        kind="rule",
        source="user",
        quote="Always answer in Italian",
        embed=False,
    )
    llm_stub.set_defaults(missing_models=["qwen2.5:7b"])
    llm_stub.script(
        {"content": "Rome is in Italy."},
        {
            "json": {"violations": ["English"], "verdict": "rewrite", "critique": "Italian."},
            "match": "antagonistic reviewer",
        },
        {"content": "Roma è in Italia.", "match": "A reviewer found"},
    )

    reply = await _answer(
        user, debate_enabled=True, model_fallbacks={"chat": ["demo"], "critic": ["demo"]}
    )

    assert (reply.status, reply.content, reply.model) == ("complete", "Roma è in Italia.", "demo")
    assert reply.trace["debate"]["rewritten"] is True
    assert [body["model"] for body in _chat_requests(llm_stub)] == [
        "qwen2.5:7b",  # the draft
        "demo",
        "qwen2.5:7b",  # the review, on the critic's chain
        "demo",
        "demo",  # the rewrite
    ]


def _errors(model: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    from apps.core.metrics import metrics_text

    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics_text().decode())
        for sample in family.samples
        if sample.name == "thalamus_llm_errors_total"
        and sample.labels.get("role") == "chat"
        and sample.labels.get("model") == model
    )


async def test_each_chat_model_that_failed_before_a_fallback_answered_counts_one_error(
    user, llm_stub
):
    llm_stub.set_defaults(missing_models=["gone"])
    llm_stub.script({"fault": "http_500"}, {"content": "Rome is in Italy."})
    before = {model: await sync_to_async(_errors)(model) for model in ("qwen2.5:7b", "gone")}

    reply = await _answer(user, model_fallbacks={"chat": ["gone", "demo"]})

    assert reply.model == "demo"
    for model in ("qwen2.5:7b", "gone"):
        assert await sync_to_async(_errors)(model) - before[model] == 1
