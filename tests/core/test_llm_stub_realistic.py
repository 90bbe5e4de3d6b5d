"""The stub's opt-in behaviours of real local servers (llama-server, Ollama, vLLM)."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel, ValidationError

from llm_stub import DEFAULT_SETTINGS, StubServer
from llm_stub.tokens import LOOP_LINE, RUNAWAY_TOKENS, filler_text


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(port=0) as server:
        yield server


@pytest.fixture
def client(stub: StubServer) -> Iterator[OpenAI]:
    with OpenAI(base_url=stub.url, api_key="x", max_retries=0, timeout=10) as c:
        yield c


def words(n: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def complete(client: OpenAI, text: str, **kw: Any) -> tuple[str, str | None, Any]:
    response = client.chat.completions.create(model="qwen2.5:7b", messages=user(text), **kw)
    choice = response.choices[0]
    return choice.message.content or "", choice.finish_reason, response.usage


def stream(client: OpenAI, text: str, **kw: Any) -> tuple[str, str | None, Any]:
    chunks = list(
        client.chat.completions.create(
            model="qwen2.5:7b",
            messages=user(text),
            stream=True,
            stream_options={"include_usage": True},
            **kw,
        )
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    return content, finish[-1] if finish else None, chunks[-1].usage


def repeated_four_grams(text: str) -> set[tuple[str, ...]]:
    tokens = text.split()
    seen: set[tuple[str, ...]] = set()
    repeated: set[tuple[str, ...]] = set()
    for i in range(len(tokens) - 3):
        gram = tuple(tokens[i : i + 4])
        (repeated if gram in seen else seen).add(gram)
    return repeated


# ------------------------------------------------------------------------ context


@pytest.mark.parametrize("streamed", [False, True])
def test_a_prompt_that_fills_the_context_is_rejected_as_llama_cpp_does(
    stub: StubServer, client: OpenAI, streamed: bool
) -> None:
    stub.set_defaults(context=10)
    with pytest.raises(openai.BadRequestError) as info:
        (stream if streamed else complete)(client, words(10))
    assert info.value.status_code == 400
    assert info.value.body == {
        "code": 400,
        "message": "request (10 tokens) exceeds the available context size (10 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 10,
        "n_ctx": 10,
    }
    assert "exceeds the available context size" in info.value.message
    assert stub.requests[0]["prompt_tokens"] == 10
    assert complete(client, words(9))[1] == "stop"


@pytest.mark.parametrize("streamed", [False, True])
def test_truncate_drops_the_oldest_words_and_answers_as_ollama_does(
    stub: StubServer, client: OpenAI, streamed: bool
) -> None:
    stub.set_defaults(context=10, overflow="truncate")
    content, finish_reason, usage = (stream if streamed else complete)(client, words(30))

    # the first 4 words are kept (num_keep), then the newest 5: context - 1 in all
    assert content == "Stub reply to: w25 w26 w27 w28 w29"
    assert finish_reason == "stop"
    assert usage.prompt_tokens == 9
    [logged] = stub.requests
    assert logged["prompt_tokens"] == 30
    assert logged["prompt_tokens_used"] == 9
    assert logged["truncated"] is True


def test_num_ctx_in_the_request_counts_only_when_the_server_honours_it(
    stub: StubServer, client: OpenAI
) -> None:
    ollama_option = {"options": {"num_ctx": 5}}
    assert complete(client, words(8), extra_body=ollama_option)[1] == "stop"

    stub.set_defaults(honours_num_ctx=True, context=100)
    with pytest.raises(openai.BadRequestError) as info:
        complete(client, words(8), extra_body=ollama_option)
    assert info.value.body["n_ctx"] == 5  # type: ignore[index]
    with pytest.raises(openai.BadRequestError):
        complete(client, words(8), extra_body={"num_ctx": 6})
    assert complete(client, words(8))[1] == "stop"


# --------------------------------------------------------------- where replies end


@pytest.mark.parametrize("streamed", [False, True])
def test_max_tokens_cuts_a_longer_reply_with_finish_reason_length(
    stub: StubServer, client: OpenAI, streamed: bool
) -> None:
    ask = stream if streamed else complete
    stub.script("one two three four five six")
    assert ask(client, "hi", max_tokens=4)[:2] == ("one two three four", "length")
    text, finish_reason, usage = ask(client, "hi there", max_completion_tokens=3)
    assert (text, finish_reason) == ("Stub reply to:", "length")
    assert usage.completion_tokens == 3
    stub.script("short")
    assert ask(client, "hi", max_tokens=4)[:2] == ("short", "stop")
    assert [r["max_tokens"] for r in stub.requests] == [4, 3, 4]
    assert [r["finish_reason"] for r in stub.requests] == ["length", "length", "stop"]


@pytest.mark.parametrize("streamed", [False, True])
def test_without_eos_the_model_runs_on_to_max_tokens_with_filler(
    stub: StubServer, client: OpenAI, streamed: bool
) -> None:
    stub.set_defaults(eos=False)
    stub.script("The answer is 42.")
    text, finish_reason, usage = (stream if streamed else complete)(client, "q", max_tokens=300)

    assert text.startswith("The answer is 42. ")
    assert finish_reason == "length"
    assert usage.completion_tokens == len(text.split()) == 300
    assert not repeated_four_grams(text)
    assert stub.requests[0]["completion_tokens"] == 300


def test_without_eos_or_max_tokens_the_model_fills_the_context(
    stub: StubServer, client: OpenAI
) -> None:
    stub.set_defaults(eos=False, context=50)
    text, finish_reason, usage = complete(client, words(8))
    assert finish_reason == "length"
    assert usage.prompt_tokens + usage.completion_tokens == 50


def test_without_eos_max_tokens_or_context_the_model_stops_after_4096_tokens(
    stub: StubServer, client: OpenAI
) -> None:
    stub.set_defaults(eos=False)
    text, finish_reason, usage = complete(client, "q")
    assert finish_reason == "length"
    assert usage.completion_tokens == RUNAWAY_TOKENS == 4096


def test_filler_reads_like_sentences_and_never_repeats() -> None:
    text = filler_text("a request", 4000)
    assert len(text.split()) == 4000
    assert not repeated_four_grams(text)
    assert len(re.findall(r"[.?!](?= [A-Z])", text)) > 200
    assert (
        filler_text("a request", 50)
        == filler_text("a request", 4000)[: len(filler_text("a request", 50))]
    )
    assert filler_text("another request", 50) != filler_text("a request", 50)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_looping_model_repeats_the_same_line_up_to_the_limit(
    stub: StubServer, client: OpenAI, streamed: bool
) -> None:
    stub.set_defaults(loop=True)
    stub.script("Here goes.")
    text, finish_reason, usage = (stream if streamed else complete)(client, "q", max_tokens=35)

    assert text.startswith("Here goes.\n" + LOOP_LINE * 2)
    assert finish_reason == "length"
    assert usage.completion_tokens == 35


def test_special_tokens_leak_the_chat_template_around_the_reply(
    stub: StubServer, client: OpenAI
) -> None:
    stub.set_defaults(special_tokens=True)
    stub.script("Hello.")
    assert complete(client, "hi")[0] == "<|im_start|>assistant\nHello.<|im_end|>\nuser\n"

    stub.set_defaults(eos=False)
    stub.script("Hello.")
    text, finish_reason, _ = stream(client, "hi", max_tokens=20)
    assert text.startswith("<|im_start|>assistant\nHello.<|im_end|>\nuser\n")
    assert len(text.split()) == 20
    assert finish_reason == "length"


# ---------------------------------------------------------------- structured output


class Fact(BaseModel):
    subject: str
    detail: str
    confidence: float
    tags: list[str]


FACT_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "Fact", "schema": Fact.model_json_schema()},
}


def test_json_junk_empty_is_an_empty_object_that_fails_validation(
    stub: StubServer, client: OpenAI
) -> None:
    stub.set_defaults(json_junk="empty")
    content = complete(client, "q", response_format=FACT_FORMAT)[0]
    assert content == "{}"
    with pytest.raises(ValidationError):
        Fact.model_validate_json(content)


def test_json_junk_meaningless_is_valid_but_says_nothing(stub: StubServer, client: OpenAI) -> None:
    stub.set_defaults(json_junk="meaningless")
    fact = Fact.model_validate_json(complete(client, "q", response_format=FACT_FORMAT)[0])
    assert fact == Fact(subject="N/A", detail="string", confidence=0, tags=[])


def test_json_junk_prose_wraps_the_json_in_chatter_and_a_fence(
    stub: StubServer, client: OpenAI
) -> None:
    stub.set_defaults(json_junk="prose")
    content = complete(client, "q", response_format=FACT_FORMAT)[0]
    assert content.startswith("Sure! Here is the JSON:\n```json\n")
    with pytest.raises(ValidationError):
        Fact.model_validate_json(content)
    fenced = re.search(r"```json\n(.*?)\n```", content, flags=re.DOTALL)
    assert fenced is not None
    assert Fact.model_validate_json(fenced.group(1)) == Fact(
        subject="", detail="", confidence=0, tags=[]
    )


def test_json_junk_leaves_scripted_replies_alone(stub: StubServer, client: OpenAI) -> None:
    stub.set_defaults(json_junk="empty")
    stub.script({"json": {"ok": True}})
    assert json.loads(complete(client, "q", response_format={"type": "json_object"})[0]) == {
        "ok": True
    }


def test_a_response_format_the_server_does_not_support_is_rejected(
    stub: StubServer, client: OpenAI
) -> None:
    stub.set_defaults(response_formats=["json_object"])
    with pytest.raises(openai.BadRequestError) as info:
        complete(client, "q", response_format=FACT_FORMAT)
    assert info.value.body == {
        "code": 400,
        "message": "response_format type 'json_schema' is not supported",
        "type": "invalid_request_error",
    }
    assert complete(client, "q", response_format={"type": "json_object"})[0] == "{}"
    assert complete(client, "q", response_format={"type": "text"})[0] == "Stub reply to: q"


# -------------------------------------------------------------------------- slots


def test_one_slot_serves_concurrent_requests_one_after_the_other(stub: StubServer) -> None:
    stub.set_defaults(slots=1, ttft=0.2)
    finished: list[float] = []
    # Both clients exist before either asks, so the two requests arrive together.
    together = threading.Barrier(2)

    def ask_in_thread(text: str) -> None:
        with OpenAI(base_url=stub.url, api_key="x", max_retries=0, timeout=10) as c:
            together.wait(timeout=10)
            complete(c, text)
        finished.append(time.monotonic())

    started = time.monotonic()
    threads = [threading.Thread(target=ask_in_thread, args=(f"q{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert len(finished) == 2
    assert max(finished) - started >= 0.39  # two ttfts back to back, not side by side
    assert stub.max_concurrent == 1
    # The second waited for the first's 0.2 s, less however late it arrived: without
    # slots this wait is 0.
    assert sorted(r["slot_wait"] for r in stub.requests)[1] >= 0.1
    stats = httpx.get(f"{stub.root_url}/_stub/stats", timeout=5).json()
    assert stats == {"max_concurrent": 1, "requests": 2}


def test_without_slots_requests_run_side_by_side(stub: StubServer) -> None:
    stub.set_defaults(ttft=0.2)
    threads = [
        threading.Thread(
            target=httpx.post,
            args=(f"{stub.url}/chat/completions",),
            kwargs={"json": {"messages": user("q")}, "timeout": 5},
        )
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert stub.max_concurrent == 2


def test_a_stream_the_client_abandons_frees_its_slot(stub: StubServer, client: OpenAI) -> None:
    stub.set_defaults(slots=1, eos=False, tps=50)  # 1000 tokens would take 20 s
    runaway = client.chat.completions.create(
        model="m", messages=user("go on"), stream=True, max_tokens=1000
    )
    next(iter(runaway))
    next(iter(runaway))

    second: dict[str, Any] = {}

    def ask_second() -> None:
        with OpenAI(base_url=stub.url, api_key="x", max_retries=0, timeout=10) as c:
            second["reply"] = complete(c, "next", max_tokens=3)
        second["done"] = time.monotonic()

    thread = threading.Thread(target=ask_second)
    thread.start()
    stub.wait_for_requests(2)
    time.sleep(0.2)
    assert "done" not in second  # the single slot is still busy

    closed_at = time.monotonic()
    runaway.close()
    thread.join(timeout=10)
    # Freed at the runaway's next token, not after the 20 s it had left.
    assert second["done"] - closed_at < 5
    assert second["reply"][:2] == ("Stub reply to:", "length")
    assert stub.max_concurrent == 1


def test_a_resend_reply_its_client_left_goes_to_the_next_request(
    stub: StubServer, client: OpenAI
) -> None:
    stub.script({"content": "the one scripted answer " * 20, "tps": 50, "resend": True})
    left = client.chat.completions.create(model="m", messages=user("q"), stream=True)
    next(iter(left))
    left.close()
    # The stub gives the reply back when it notices, at its next token.
    deadline = time.monotonic() + 5
    while not stub.pending:
        assert time.monotonic() < deadline, "the stub kept the reply of a client that left"
        time.sleep(0.01)

    assert complete(client, "q again")[0].startswith("the one scripted answer")
    assert stub.pending == []


def test_stop_is_prompt_while_a_request_waits_for_a_slot() -> None:
    server = StubServer(port=0).start()
    # the first request holds the only slot through its ttft, the second waits for it
    server.set_defaults(slots=1, ttft=30)

    def request() -> None:
        with contextlib.suppress(httpx.HTTPError):  # stop() cuts it off, as intended
            httpx.post(f"{server.url}/chat/completions", json={"messages": user("q")}, timeout=10)

    threads = [threading.Thread(target=request, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    server.wait_for_requests(2)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2
    for thread in threads:
        thread.join(timeout=5)
        assert not thread.is_alive()


# ------------------------------------------------------------------------- pacing


def test_filler_streams_at_the_set_tokens_per_second(stub: StubServer, client: OpenAI) -> None:
    stub.set_defaults(eos=False, tps=13)
    stub.script({"content": "Hi.", "tps": 13})
    started = time.monotonic()
    text, finish_reason, _ = stream(client, "q", max_tokens=14)
    elapsed = time.monotonic() - started

    assert len(text.split()) == 14
    assert finish_reason == "length"
    # 13 gaps of 1/13 s after the first token; three times that at most on a loaded machine.
    assert 13 / 13 - 0.05 <= elapsed < 3


def test_a_runaway_non_streamed_reply_takes_its_generation_time(
    stub: StubServer, client: OpenAI
) -> None:
    stub.set_defaults(eos=False, tps=40)
    started = time.monotonic()
    assert complete(client, "q", max_tokens=11)[1] == "length"
    assert time.monotonic() - started >= 0.24  # 10 gaps of 1/40 s


# ---------------------------------------------------------------- server identity


def test_a_llama_cpp_server_describes_itself_at_props(stub: StubServer) -> None:
    assert httpx.get(f"{stub.root_url}/props", timeout=5).status_code == 404
    stub.set_defaults(server="llamacpp", context=8192, slots=2)
    props = httpx.get(f"{stub.root_url}/props", timeout=5).json()
    assert props == {
        "default_generation_settings": {"n_ctx": 8192, "params": {"n_predict": -1}},
        "total_slots": 2,
        "model_path": "/models/qwen2.5:7b.gguf",
        "build_info": "stub",
    }
    stub.set_defaults(context=None, slots=None)
    props = httpx.get(f"{stub.root_url}/props", timeout=5).json()
    assert props["default_generation_settings"]["n_ctx"] == 4096
    assert props["total_slots"] == 1


def test_an_ollama_server_shows_its_models(stub: StubServer) -> None:
    show = f"{stub.root_url}/api/show"
    assert httpx.post(show, json={"model": "qwen2.5:7b"}, timeout=5).status_code == 404
    stub.set_defaults(server="ollama")

    shown = httpx.post(show, json={"model": "qwen2.5:7b"}, timeout=5).json()
    assert shown["model_info"]["qwen2.context_length"] == 32768
    assert shown["parameters"] == 'stop "<|im_end|>"'
    assert shown["details"]["family"] == "qwen2"

    stub.set_defaults(context=2048)
    shown = httpx.post(show, json={"name": "qwen2.5:7b"}, timeout=5).json()
    assert shown["parameters"] == 'num_ctx 2048\nstop "<|im_end|>"'
    stub.set_defaults(modelfile_num_ctx=False)
    shown = httpx.post(show, json={"name": "qwen2.5:7b"}, timeout=5).json()
    assert shown["parameters"] == 'stop "<|im_end|>"'

    missing = httpx.post(show, json={"model": "llama3"}, timeout=5)
    assert missing.status_code == 404
    assert missing.json() == {"error": "model 'llama3' not found"}


def test_an_ollama_server_lists_the_models_it_loaded_with_their_window(
    stub: StubServer, client: OpenAI
) -> None:
    stub.set_defaults(server="ollama")
    ps = f"{stub.root_url}/api/ps"
    assert httpx.get(ps, timeout=5).json() == {"models": []}

    complete(client, words(3))
    stub.set_defaults(context=2048)

    (loaded,) = httpx.get(ps, timeout=5).json()["models"]
    assert (loaded["model"], loaded["context_length"]) == ("qwen2.5:7b", 2048)


def test_an_ollama_server_keeps_the_end_of_an_overflowing_prompt_whatever_overflow_says(
    stub: StubServer, client: OpenAI
) -> None:
    stub.set_defaults(server="ollama", context=10, overflow="reject")

    content, finish_reason, usage = complete(client, words(30))

    assert (content, finish_reason) == ("Stub reply to: w25 w26 w27 w28 w29", "stop")
    assert usage.prompt_tokens == 9
    assert stub.requests[0]["truncated"] is True


def test_a_vllm_server_lists_each_models_max_model_len(stub: StubServer, client: OpenAI) -> None:
    assert "max_model_len" not in client.models.list().data[0].model_extra  # type: ignore[operator]
    stub.set_defaults(server="vllm")
    assert [m.model_extra["max_model_len"] for m in client.models.list()] == [4096] * 3  # type: ignore[index]
    stub.set_defaults(context=16384)
    assert client.models.retrieve("qwen2.5:7b").model_extra["max_model_len"] == 16384  # type: ignore[index]


# ----------------------------------------------------------------------- settings


def test_settings_can_be_set_over_http_and_reset_restores_them(
    stub: StubServer, client: OpenAI
) -> None:
    with httpx.Client(base_url=stub.root_url, timeout=5) as http:
        answer = http.post(
            "/_stub/defaults", json={"context": 5, "overflow": "truncate", "json_junk": None}
        )
        assert answer.status_code == 200
        assert answer.json()["defaults"]["context"] == 5
        assert complete(client, words(9))[2].prompt_tokens == 4

        bad = http.post("/_stub/defaults", json={"overflow": "shrug"})
        assert bad.status_code == 400
        assert "overflow" in bad.json()["error"]["message"]

        # The completion's handler may still hold its slot after its client has the reply;
        # a reset counts the generations still running.
        deadline = time.monotonic() + 5
        while stub.generating and time.monotonic() < deadline:
            time.sleep(0.01)
        http.post("/_stub/reset")
    assert stub.defaults == DEFAULT_SETTINGS
    assert stub.max_concurrent == 0


@pytest.mark.parametrize(
    "setting",
    [
        {"context": 0},
        {"context": "big"},
        {"slots": True},
        {"eos": "no"},
        {"json_junk": "noise"},
        {"server": "tgi"},
        {"response_formats": "json_object"},
    ],
)
def test_invalid_settings_are_rejected(stub: StubServer, setting: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        stub.set_defaults(**setting)
    assert stub.defaults == DEFAULT_SETTINGS
