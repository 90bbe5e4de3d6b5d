"""The start every answer shares is sent to the chat's server once when a web process starts, as
background work that gives way to answers, so that a conversation's first turn finds it in the
server's prompt cache (apps/cognition/prompt_cache.py)."""

from __future__ import annotations

import uuid

import pytest

from apps.cognition.prompt_cache import answer_prefix, prompt_cache_prime
from apps.cognition.turn_request import system_prompt
from apps.core.llm.limits import CHAT, role_endpoint
from apps.core.llm.priority import chat_active_clear, chat_active_mark
from apps.core.models import PromptOverride
from apps.core.prompts import file_prompt_text

pytestmark = pytest.mark.django_db


def _primes(llm_stub) -> list[dict]:
    return [
        request["body"]
        for request in llm_stub.requests
        if request["path"].endswith("/chat/completions")
    ]


def _new_template() -> str:
    """The shipped template under a first line of its own: a prefix no earlier test sent."""
    template = f"Conversation {uuid.uuid4().hex}.\n{file_prompt_text('answer')}"
    PromptOverride.objects.create(name="answer", text=template)
    return template


def test_every_answers_system_prompt_starts_with_the_shipped_templates_instructions():
    template = file_prompt_text("answer")
    prefix = answer_prefix(template)

    system = system_prompt(
        template=template,
        time_zone="Europe/Prague",
        user_name="radek",
        world="Radek is in the Tatras this week.",
        instructions="Answer in bullet points.",
        marker="\u00a6",
    )

    assert system.startswith(f"{prefix}\n\n")
    # The instructions, and nobody's name, date, world state or datamark.
    assert "<memory>" in prefix and "Markdown" in prefix
    assert "{{" not in prefix and "radek" not in system[: len(prefix)]


def test_a_starting_web_process_sends_the_prefix_once_for_one_token(llm_stub, config):
    config(turns_per_minute=0)
    prefix = answer_prefix(_new_template())

    assert prompt_cache_prime() is True
    assert prompt_cache_prime() is False

    (body,) = _primes(llm_stub)
    assert body["messages"] == [{"role": "system", "content": prefix}]
    assert body["max_tokens"] == 1


def test_the_prefix_gives_way_to_an_answer_and_is_sent_by_the_next_process(llm_stub, config):
    config(turns_per_minute=0, background_wait_seconds=0)
    llm_stub.set_defaults(slots=1)
    _new_template()
    base_url = role_endpoint(CHAT).base_url

    chat_active_mark(base_url=base_url, call_id="answer")
    try:
        assert prompt_cache_prime() is False
    finally:
        chat_active_clear(base_url=base_url, call_id="answer")
    assert _primes(llm_stub) == []

    assert prompt_cache_prime() is True
    assert len(_primes(llm_stub)) == 1
