"""Model limits as data: asked of the server where it tells, else the runtime settings."""

from __future__ import annotations

import threading
import time

import pytest

from apps.core.llm.gateway import complete
from apps.core.llm.limits import (
    CHAT,
    CRITIC,
    EMBEDDING,
    REFLECTION,
    TITLE,
    TITLE_MAX_TOKENS,
    Endpoint,
    learn_from_refusal,
    model_limits,
    prompt_and_limits,
    role_endpoint,
    token_counter,
    truncation_warnings,
    usage_check,
)
from apps.core.llm.outcomes import TimedOut
from apps.core.llm.priority import chat_active_clear, chat_active_mark
from apps.core.models import Event

pytestmark = pytest.mark.django_db


def test_without_a_word_from_the_server_the_runtime_settings_stand(llm_stub, config):
    config(context_tokens=4096, answer_max_tokens=1024, background_max_tokens=700)

    chat = model_limits(CHAT)
    assert (chat.context, chat.reply_cap, chat.server) == (4096, 1024, "unknown")
    assert chat.source == "runtime setting"
    assert chat.prompt_budget == 4096 - 1024 - 64
    assert model_limits(REFLECTION).reply_cap == 700
    assert model_limits(TITLE).reply_cap == TITLE_MAX_TOKENS
    assert model_limits(EMBEDDING).reply_cap == 0


def test_llama_cpp_tells_its_window_through_props(llm_stub, config):
    llm_stub.set_defaults(server="llamacpp", context=2048)

    limits = model_limits(CHAT)

    assert (limits.context, limits.server, limits.source) == (2048, "llama.cpp", "llama.cpp /props")
    # The cap never leaves less than half the window for the prompt.
    assert limits.reply_cap == 1024


def test_ollama_tells_its_num_ctx_through_api_show(llm_stub, config):
    llm_stub.set_defaults(server="ollama", context=8192)

    limits = model_limits(CHAT)

    assert (limits.context, limits.server) == (8192, "ollama")
    assert "num_ctx" in limits.source


def test_a_server_listing_max_model_len_is_believed(llm_stub, config):
    llm_stub.set_defaults(server="vllm", context=16384)

    assert model_limits(CHAT).context == 16384


def test_each_background_role_can_use_its_own_endpoint_and_model(config, llm_stub):
    config(
        reflection_base_url="http://127.0.0.1:9/v1",
        reflection_model="small",
        critic_model="critic-3b",
    )

    assert role_endpoint(REFLECTION) == Endpoint("http://127.0.0.1:9/v1", "small")
    assert role_endpoint(CRITIC).model == "critic-3b"
    assert role_endpoint(CRITIC).base_url == role_endpoint(CHAT).base_url
    # An unreachable server tells nothing: the settings stand, nothing raises.
    assert model_limits(REFLECTION).source == "runtime setting"


def test_the_token_estimate_is_calibrated_from_the_usage_the_server_reports(llm_stub):
    endpoint = role_endpoint(CHAT)
    messages = [{"role": "user", "content": "word " * 400}]
    before = token_counter(endpoint)
    assert not before.calibrated

    assert usage_check(endpoint=endpoint, messages=messages, prompt_tokens=406, role=CHAT)

    after = token_counter(endpoint)
    assert after.calibrated
    assert after.messages(messages) == pytest.approx(406, rel=0.05)


def test_a_prompt_the_server_read_only_in_part_is_a_warning_not_a_calibration(llm_stub, config):
    endpoint = role_endpoint(CHAT)
    messages = [{"role": "user", "content": "word " * 2000}]
    usage_check(endpoint=endpoint, messages=messages[:1], prompt_tokens=2006, role=CHAT)
    ratio = token_counter(endpoint).chars_per_token

    read_all = usage_check(endpoint=endpoint, messages=messages, prompt_tokens=512, role=CHAT)

    assert read_all is False
    assert token_counter(endpoint).chars_per_token == ratio
    (warning,) = truncation_warnings()
    assert warning["reported_prompt_tokens"] == 512 and "num_ctx" in warning["fix"]
    event = Event.objects.get(kind=Event.Kind.WARNING)
    assert "silently truncates" in event.summary


def test_llama_cpps_refusal_teaches_the_window_and_the_token_ratio(llm_stub, config):
    config(context_tokens=8192)
    endpoint = role_endpoint(CHAT)
    messages = [{"role": "user", "content": "x" * 16_000}]
    error = (
        "Error code: 400 - {'error': {'message': 'request (4200 tokens) exceeds the available "
        "context size (4096 tokens), try increasing it'}}"
    )

    assert learn_from_refusal(endpoint=endpoint, messages=messages, error=error)

    assert model_limits(CHAT).context == 4096
    assert token_counter(endpoint).messages(messages) == pytest.approx(4200, rel=0.02)
    assert not learn_from_refusal(endpoint=endpoint, messages=messages, error="HTTP 500")


def test_a_background_call_sends_max_tokens_at_most_its_cap(llm_stub, config):
    config(background_max_tokens=300)
    llm_stub.set_defaults(server="ollama", context=4096)

    completion = complete(
        role=REFLECTION, prompt=[{"role": "user", "content": "hello"}], max_tokens=5000
    )

    assert completion.finish_reason == "stop"
    assert llm_stub.requests[-1]["body"]["max_tokens"] == 300


def test_a_background_call_waits_while_an_answer_streams_from_its_endpoint(llm_stub, config):
    config(background_wait_seconds=10)
    base_url = role_endpoint(CHAT).base_url
    chat_active_mark(base_url=base_url, call_id="1")
    threading.Timer(0.6, lambda: chat_active_clear(base_url=base_url, call_id="1")).start()

    started = time.monotonic()
    completion = complete(role=REFLECTION, prompt=[{"role": "user", "content": "hello"}])

    assert time.monotonic() - started >= 0.5
    assert completion.waited_seconds >= 0.5


def test_a_background_call_past_its_time_limit_times_out(llm_stub, config):
    config(background_timeout_seconds=5)
    llm_stub.set_defaults(tps=4, eos=False)

    with pytest.raises(TimedOut):
        complete(role=REFLECTION, prompt=[{"role": "user", "content": "hello"}], max_tokens=500)


def test_a_server_that_drops_the_start_of_a_prompt_is_caught_and_reported(llm_stub, config):
    # A server that does not say its window, and silently drops the oldest words past it (as
    # Ollama's /v1 does with its default num_ctx): the runtime setting is believed.
    config(context_tokens=8192, background_max_tokens=64)
    llm_stub.set_defaults(context=512, overflow="truncate")
    long = "The user said many things. " * 300

    completion = complete(role=REFLECTION, prompt=[{"role": "user", "content": long}])

    assert completion.prompt_tokens < 512
    (warning,) = truncation_warnings()
    assert warning["role"] == REFLECTION and warning["reported_prompt_tokens"] < 512
    assert Event.objects.filter(kind=Event.Kind.WARNING).count() == 1


def test_a_reply_that_is_done_is_not_read_to_its_cap(llm_stub, config):
    llm_stub.set_defaults(eos=False, tps=50)
    llm_stub.script({"content": '{"ok": true}'})

    started = time.monotonic()
    completion = complete(
        role=REFLECTION,
        prompt=[{"role": "user", "content": "json please"}],
        max_tokens=500,
        done=lambda text: text.rstrip().endswith("}"),
    )

    assert completion.content.strip() == '{"ok": true}'
    assert completion.finish_reason == "stop"
    assert time.monotonic() - started < 5, "500 rambling tokens at 50/s would take 10 s"


def test_the_turns_one_round_trip_reads_what_the_single_reads_would(llm_stub, config):
    from apps.core.models import PromptOverride
    from apps.core.selectors import forget_prompt_override, prompt_text

    llm_stub.set_defaults(server="llamacpp", context=2048)
    endpoint = role_endpoint(CHAT)
    # Nothing known yet: the server is asked, as model_limits alone would ask it.
    template, limits, counter = prompt_and_limits("answer", CHAT)
    assert (limits.context, limits.server) == (2048, "llama.cpp")
    assert template == prompt_text("answer") and not counter.calibrated

    PromptOverride.objects.create(name="answer", text="Overridden {memory} {user_name}")
    forget_prompt_override("answer")  # as the admin does on commit
    messages = [{"role": "user", "content": "x" * 16_000}]
    error = "request (4200 tokens) exceeds the available context size (1536 tokens)"
    assert learn_from_refusal(endpoint=endpoint, messages=messages, error=error)

    template, limits, counter = prompt_and_limits("answer", CHAT)

    assert template == prompt_text("answer") == "Overridden {memory} {user_name}"
    assert limits == model_limits(CHAT) and limits.context == 1536
    assert counter == token_counter(endpoint) and counter.calibrated
