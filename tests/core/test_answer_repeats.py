"""The answer asks the server not to repeat itself, in the fields that server documents."""

from __future__ import annotations

import pytest

from apps.core.llm.streaming import Answering, stream

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = [{"role": "user", "content": "Tell me about bees."}]


async def _answer_body(llm_stub, **server) -> dict:
    llm_stub.set_defaults(**server)
    parts = [
        part
        async for part in stream(
            prompt=PROMPT, answering=Answering(), temperature=0.7, sampling={"seed": 3}
        )
    ]
    assert "".join(part.text for part in parts)
    return llm_stub.requests[-1]["body"]


async def test_llama_cpp_is_asked_for_its_dry_sampler_and_repeat_penalty(llm_stub):
    body = await _answer_body(llm_stub, server="llamacpp", context=4096)

    assert body["dry_multiplier"] == 0.8 and body["dry_allowed_length"] == 2
    assert body["dry_base"] == 1.75
    assert body["repeat_penalty"] == 1.1 and body["repeat_last_n"] == 256
    assert body["seed"] == 3 and body["temperature"] == 0.7, "the client's fields still go"


@pytest.mark.parametrize("server", ["ollama", "plain", "vllm"])
async def test_other_servers_get_no_field_they_do_not_document(llm_stub, server):
    body = await _answer_body(llm_stub, server=server, context=4096)

    assert not {"dry_multiplier", "repeat_penalty", "repeat_last_n"} & set(body)
