"""Ollama gets the window Thalamus budgets for: its /v1 ignores a request's num_ctx, so the
budget is the window Ollama runs the model with (the Modelfile's num_ctx, the loaded model's
context_length from /api/ps, else THALAMUS_OLLAMA_CONTEXT_LENGTH), and the start of the prompt,
where the system prompt is, is never the part Ollama drops."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.core.cache import cache
from pydantic import BaseModel

from apps.core.cache import redis_client
from apps.core.llm.fitting import Room
from apps.core.llm.gateway import complete
from apps.core.llm.limits import (
    CHAT,
    REFLECTION,
    forget_model_limits,
    model_limits,
    role_endpoint,
)
from apps.core.llm.servers import GUESSED_SECONDS, facts_key
from apps.core.llm.streaming import Answering, stream
from apps.core.llm.structured import complete_as

pytestmark = pytest.mark.django_db

SYSTEM = {"role": "system", "content": "RULE-AT-THE-START: answer in French."}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "clock",
            "description": "The time now.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


class Verdict(BaseModel):
    ok: bool


def _history(turns: int) -> list[dict]:
    return [
        {
            "role": "user" if n % 2 == 0 else "assistant",
            "content": " ".join(f"m{n}w{i}" for i in range(100)),
        }
        for n in range(turns)
    ]


def _prompt(room: Room) -> list[dict]:
    """The system prompt, then as much of the newest history as the room takes."""
    kept: list[dict] = []
    for message in reversed(_history(81)):
        if room.counter.messages([SYSTEM, message, *kept]) > room.budget:
            break
        kept.insert(0, message)
    return [SYSTEM, *kept]


def _ollama(llm_stub, config, *, window: int) -> None:
    # What Thalamus believed of an Ollama without num_ctx before: the runtime setting.
    config(context_tokens=32768, answer_max_tokens=256, background_max_tokens=256)
    llm_stub.set_defaults(server="ollama", modelfile_num_ctx=False, context=window)


def _load() -> None:
    """Ollama loads a model at its first request; /api/ps tells its window from then on."""
    complete(role=REFLECTION, prompt=[{"role": "user", "content": "hello"}])
    forget_model_limits()


def _sent(llm_stub) -> dict:
    """The one request that carried the long prompt."""
    (sent,) = [r for r in llm_stub.requests if r["body"]["messages"][0] == SYSTEM]
    return sent


def test_an_ollama_model_not_yet_loaded_is_budgeted_for_ollamas_default_window(llm_stub, config):
    _ollama(llm_stub, config, window=4096)

    limits = model_limits(CHAT)

    assert (limits.context, limits.server) == (4096, "ollama")
    assert "THALAMUS_OLLAMA_CONTEXT_LENGTH" in limits.source
    # Asked again soon: once the model is loaded, /api/ps tells the window for sure.
    ttl = redis_client().ttl(cache.make_key(facts_key(role_endpoint(CHAT))))
    assert 0 < ttl <= GUESSED_SECONDS


def test_the_default_window_is_the_operators_and_never_beyond_the_trained_length(
    llm_stub, config, settings
):
    _ollama(llm_stub, config, window=4096)
    settings.THALAMUS_OLLAMA_CONTEXT_LENGTH = 131072

    # The stub's model was trained on 32,768 tokens.
    assert model_limits(CHAT).context == 32768


def test_a_loaded_ollama_model_is_budgeted_for_the_window_api_ps_tells(llm_stub, config):
    _ollama(llm_stub, config, window=1024)
    _load()

    limits = model_limits(CHAT)

    assert (limits.context, limits.source) == (1024, "Ollama /api/ps context_length")


def test_a_modelfiles_num_ctx_is_still_believed_first(llm_stub, config):
    _ollama(llm_stub, config, window=8192)
    llm_stub.set_defaults(modelfile_num_ctx=True)

    assert model_limits(CHAT).source == "Ollama /api/show num_ctx"
    assert model_limits(CHAT).context == 8192


def test_no_num_ctx_is_sent_to_ollamas_v1_which_ignores_it(llm_stub, config):
    _ollama(llm_stub, config, window=4096)

    complete(role=REFLECTION, prompt=[{"role": "user", "content": "hello"}], max_tokens=5000)

    body = llm_stub.requests[-1]["body"]
    assert body["max_tokens"] == 256
    assert "options" not in body and "num_ctx" not in body


def _assert_the_start_survived(sent: dict, window: int) -> None:
    assert sum(len(m["content"].split()) for m in [SYSTEM, *_history(81)]) > window
    assert sent["truncated"] is False
    assert sent["prompt_tokens_used"] < window
    assert sent["body"]["messages"][0] == SYSTEM
    assert len(sent["body"]["messages"]) > 1


CALLS = {
    "a background call": lambda: complete(role=REFLECTION, prompt=_prompt),
    "a structured call": lambda: complete_as(Verdict, role=REFLECTION, prompt=_prompt),
    "a call with tools": lambda: complete(role=CHAT, prompt=_prompt, tools=TOOLS),
}


@pytest.mark.parametrize("loaded", [False, True], ids=["default window", "loaded model"])
@pytest.mark.parametrize("call", list(CALLS))
def test_the_system_prompt_survives_a_history_longer_than_ollamas_window(
    llm_stub, config, call, loaded
):
    window = 1024 if loaded else 4096
    _ollama(llm_stub, config, window=window)
    if loaded:
        _load()
    if call == "a structured call":
        llm_stub.script({"json": {"ok": True}})

    CALLS[call]()

    _assert_the_start_survived(_sent(llm_stub), window)


@pytest.mark.django_db(transaction=True)
async def test_the_system_prompt_survives_in_a_streamed_answer(llm_stub, config):
    await sync_to_async(_ollama)(llm_stub, config, window=1024)
    await sync_to_async(_load)()

    parts = [p async for p in stream(prompt=_prompt, answering=Answering(), temperature=None)]

    assert "".join(part.text for part in parts).startswith("Stub reply to:")
    _assert_the_start_survived(_sent(llm_stub), 1024)
