"""A conversation's first turn on the real one-slot server reads only what follows the start every
answer shares, once a starting web process sent that start (apps/cognition/prompt_cache.py),
even after other work took the only slot: llama-server keeps it in host memory (--cache-ram)."""

from __future__ import annotations

import httpx
import pytest
from asgiref.sync import sync_to_async

from apps.chat.models import Conversation, Message
from apps.cognition.prompt_cache import prompt_cache_prime
from apps.cognition.system_prompt import answer_start
from bench._llama import MODEL_NAME
from tests.cognition.test_prompt_cache_prime import _new_template
from tests.real_llm.test_real_prompt_cache import _tokens, _turn

pytestmark = [pytest.mark.real_llm, pytest.mark.django_db(transaction=True)]

# The template's markers around the system prompt, and a token where the prefix meets the rest.
SLACK = 8


async def test_a_first_turn_after_priming_reads_only_what_follows_the_shared_start(
    user, on_real_llm, one_slot_real_llm
):
    await sync_to_async(on_real_llm)(
        llm_base_url=one_slot_real_llm.url, answer_max_tokens=16, reflection_enabled=False
    )
    # A start no earlier test sent: without the priming the whole prompt is read.
    prefix = answer_start(await sync_to_async(_new_template)())
    prefix_tokens = _tokens(one_slot_real_llm, prefix)

    assert await sync_to_async(prompt_cache_prime)()
    # Other work takes the only slot in between.
    httpx.post(
        f"{one_slot_real_llm.url}/chat/completions",
        json={
            "model": MODEL_NAME,
            "messages": [{"role": "user", "content": "Name three rivers. " * 20}],
            "max_tokens": 1,
        },
        timeout=120,
    ).raise_for_status()
    conversation = await Conversation.objects.acreate(owner=user)
    reply = await _turn(conversation, "Hi, I am Radek and I like hiking in the Tatras.")

    assert reply.status == Message.Status.COMPLETE
    assert prefix_tokens > 150
    evaluated = reply.trace["prompt_cache"]["evaluated"]
    assert evaluated <= reply.prompt_tokens - prefix_tokens + SLACK, (evaluated, prefix_tokens)
