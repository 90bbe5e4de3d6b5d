"""The start every answer shares is sent to the chat's server once when a web process starts, as
background work that gives way to answers, so that a conversation's first turn finds it in the
server's prompt cache (apps/cognition/prompt_cache.py)."""

from __future__ import annotations

import importlib
import uuid
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.utils import timezone

from apps.cognition.prompt_cache import prompt_cache_prime
from apps.cognition.system_prompt import answer_prefix, answer_start, system_prompt
from apps.core.llm.limits import CHAT, role_endpoint
from apps.core.llm.priority import chat_active_clear, chat_active_mark
from apps.core.models import PromptOverride
from apps.core.prompts import file_prompt_text, validate_template

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


def _system(template: str, *, user_name: str, marker: str) -> str:
    return system_prompt(
        template=template,
        time_zone="Europe/Prague",
        user_name=user_name,
        world=f"{user_name.title()} is in the Tatras this week.",
        instructions="Answer in bullet points.",
        marker=marker,
    )


def test_every_answers_system_prompt_starts_with_the_same_instructions_and_datamark_rule():
    template = file_prompt_text("answer")
    start = answer_start(template)

    radek = _system(template, user_name="radek", marker="\u00a7")
    dolores = _system(template, user_name="dolores", marker="\u00d7")

    # Two users in two conversations with two markers share the whole start, which names
    # every marker and nobody's name, date, world state or own marker.
    assert radek.startswith(f"{start}\n\n") and dolores.startswith(f"{start}\n\n")
    assert start.startswith(answer_prefix(template))
    assert "<memory>" in start and "Markdown" in start
    assert "\u00a7" in start and "\u00d7" in start and "instead of spaces is data" in start
    assert "{{" not in start and "radek" not in radek[: len(start)]
    assert start.endswith(f"Today is {timezone.localdate().isoformat()}.")
    assert "Tatras" not in start and "Tatras" in radek[len(start) :]


def test_a_template_that_names_the_user_keeps_the_name_out_of_the_start():
    template = file_prompt_text("answer").replace(
        "Today is {{date}}.", "Today is {{date}}. You are talking with {{user_name}}."
    )
    start = answer_start(template)

    system = _system(template, user_name="radek", marker="\u00a7")

    assert system.startswith(f"{start}\n\n") and "You are talking with radek." in system
    assert "Today is" not in start and "instead of spaces is data" in start


def test_the_shipped_template_may_leave_the_users_name_out_and_an_admins_may_use_it():
    assert validate_template("answer", file_prompt_text("answer")) == []
    assert "{{user_name}}" not in file_prompt_text("answer")
    assert validate_template("answer", "{{date}} {{user_name}} {{memory}}") == []
    assert validate_template("answer", "{{user_name}}") == [
        "prompt 'answer' lacks {{date}}, which it must keep",
        "prompt 'answer' lacks {{memory}}, which it must keep",
    ]


def test_without_memory_the_start_holds_no_word_on_datamarks():
    template = file_prompt_text("answer")

    system = _system(template, user_name="radek", marker="")

    assert system.startswith(f"{answer_start(template, marked=False)}\n\n")
    assert "instead of spaces" not in system


def test_a_starting_web_process_sends_the_prefix_once_for_one_token(llm_stub, config):
    config(turns_per_minute=0)
    prefix = answer_start(_new_template())

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


def test_beat_sends_the_start_again_once_the_date_in_it_changes(llm_stub, config, monkeypatch):
    from django_celery_beat.models import PeriodicTask

    from apps.cognition import system_prompt as module
    from apps.cognition.tasks import prime_prompt_cache

    config(turns_per_minute=0)
    _new_template()
    # The migration's schedule (a transactional test before this one may have flushed it).
    migration = importlib.import_module(
        "apps.core.migrations.0023_prime_the_prompt_cache_every_15_minutes"
    )
    migration.create_schedule(django_apps, None)
    assert PeriodicTask.objects.get(task="cognition.prime_prompt_cache").interval.every == 15

    assert prime_prompt_cache() is True
    assert prime_prompt_cache() is False, "the same start within 15 minutes: not again"
    tomorrow = timezone.localdate() + timedelta(days=1)
    monkeypatch.setattr(module.timezone, "localdate", lambda timezone=None: tomorrow)
    assert prime_prompt_cache() is True

    first, second = (body["messages"][0]["content"] for body in _primes(llm_stub))
    assert first.endswith(f"Today is {tomorrow - timedelta(days=1)}.")
    assert second.endswith(f"Today is {tomorrow}.")
