"""/v1 as a memory proxy, driven by the official `openai` package as Open WebUI drives it: the
whole history on every call, the client's own system prompt, no conversation header."""

from __future__ import annotations

import json
import time

import openai
import pytest

from apps.accounts.services import api_key_create
from apps.chat.models import Conversation, Message
from apps.cognition.notes import NOTE_CLOSE
from apps.cognition.reflection import TRACE_KEY
from apps.memory.services import memory_node_create

pytestmark = pytest.mark.django_db(transaction=True)

HEADER = "X-Thalamus-Conversation"
SYSTEM = "You are a terse pirate."


@pytest.fixture
def client_for(asgi_server):
    def make(user) -> openai.OpenAI:
        _, secret = api_key_create(user=user, name="open-webui")
        return openai.OpenAI(
            base_url=f"{asgi_server}/v1", api_key=secret, max_retries=0, timeout=20
        )

    return make


def _answers(llm_stub) -> list[dict]:
    """The requests of the answers (the only ones whose system prompt is the client's)."""
    return [
        r["body"]
        for r in llm_stub.requests
        if r["path"].endswith("/chat/completions")
        and r["body"]["messages"][0]["content"].startswith(SYSTEM)
    ]


def _ask(client, history: list[dict], *, stream: bool, **kwargs) -> tuple[str, str]:
    """One call with the whole history, as Open WebUI makes it: the answer and finish reason."""
    messages = [{"role": "system", "content": SYSTEM}, *history]
    if not stream:
        completion = client.chat.completions.create(model="thalamus", messages=messages, **kwargs)
        return completion.choices[0].message.content, completion.choices[0].finish_reason
    chunks = list(
        client.chat.completions.create(model="thalamus", messages=messages, stream=True, **kwargs)
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, [c.choices[0].finish_reason for c in chunks if c.choices][-1]


def test_a_client_that_trims_the_answers_it_sends_back_stays_in_one_conversation(
    client_for, user, llm_stub
):
    """A model that ends its answers with a newline, and a client that sends them back trimmed
    (or with a CRLF): the calls still continue one conversation."""
    llm_stub.script(
        {"content": "Bees like warm places.\n\n"},
        {"content": "Three hives,\nall full.\n"},
        {"content": "Sweet."},
    )
    client = client_for(user)
    history: list[dict] = []
    for question in ("Where do my bees live?", "How many hives?", "And the honey?"):
        history.append({"role": "user", "content": question})
        answer, _ = _ask(client, history, stream=False)
        history.append({"role": "assistant", "content": answer.strip().replace("\n", "\r\n")})

    assert Conversation.objects.filter(owner=user).count() == 1
    assert Conversation.objects.get(owner=user).messages.count() == 6


@pytest.mark.parametrize("stream", [False, True])
def test_calls_with_the_whole_history_land_in_one_conversation(client_for, user, llm_stub, stream):
    memory_node_create(owner=user, description="Alice keeps bees in Turin", source="admin")
    client = client_for(user)
    history: list[dict] = []
    for question in ("Where do my bees live?", "How many hives?", "And the honey?"):
        history.append({"role": "user", "content": question})
        answer, finish = _ask(client, history, stream=stream)
        assert finish == "stop"
        history.append({"role": "assistant", "content": answer})

    conversation = Conversation.objects.get(owner=user)
    saved = list(conversation.messages.values_list("role", "content"))
    assert saved == [(m["role"], m["content"]) for m in history]
    prompt = _answers(llm_stub)[-1]["messages"]
    assert [(m["role"], _without_note(m["content"])) for m in prompt[1:]] == [
        (m["role"], m["content"]) for m in history[:-1]
    ]
    # The client's system prompt leads Thalamus's; what memory found goes with the messages,
    # and the earlier ones are replayed with the notes they were sent with.
    system = prompt[0]["content"]
    assert system.startswith(SYSTEM + "\n\n")
    assert "Alice keeps bees in Turin" in prompt[1]["content"]
    earlier = _answers(llm_stub)[-2]["messages"]
    assert prompt[: len(earlier)] == earlier, "the prompt begins with the one before"


@pytest.mark.parametrize("stream", [False, True])
def test_the_clients_sampling_and_model_go_upstream(client_for, user, llm_stub, stream):
    _ask(
        client_for(user),
        [{"role": "user", "content": "Say something."}],
        stream=stream,
        temperature=0.3,
        top_p=0.8,
        max_tokens=50,
        stop=["\n\n"],
        seed=7,
    )
    other = client_for(user).chat.completions.create(
        model="thalamus/demo",
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Again."},
        ],
        stream=stream,
    )
    if stream:
        assert [c.model for c in other][0] == "thalamus/demo"
    else:
        assert other.model == "thalamus/demo"

    asked, other = _answers(llm_stub)
    assert (asked["temperature"], asked["top_p"], asked["max_tokens"]) == (0.3, 0.8, 50)
    assert (asked["stop"], asked["seed"]) == (["\n\n"], 7)
    assert other["model"] == "demo"
    assert asked["model"] != "demo"
    assert "top_p" not in other and "seed" not in other


def test_an_unknown_model_is_not_found(client_for, user, llm_stub):
    with pytest.raises(openai.NotFoundError) as caught:
        client_for(user).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.body["code"] == "model_not_found"
    assert not Message.objects.exists()


@pytest.mark.parametrize("stream", [False, True])
def test_the_upstreams_length_cut_is_the_finish_reason(client_for, user, llm_stub, stream):
    llm_stub.script({"content": "word " * 40})
    answer, finish = _ask(
        client_for(user), [{"role": "user", "content": "Talk."}], stream=stream, max_tokens=5
    )
    assert finish == "length"
    assert answer.split() == ["word"] * 5


@pytest.mark.parametrize("stream", [False, True])
def test_memory_off_leaves_memory_out_of_the_prompt_and_learns_nothing(
    client_for, user, llm_stub, celery_worker, config, stream
):
    config(reflection_quiet_seconds=1)  # the reply with memory on is reflected on a second later
    memory_node_create(owner=user, description="Alice keeps bees in Turin", source="admin")
    client = client_for(user)
    off = {"extra_headers": {"X-Thalamus-Memory": "off"}}
    _ask(client, [{"role": "user", "content": "Where do my bees live?"}], stream=stream, **off)
    _ask(client, [{"role": "user", "content": "Where are my bees?"}], stream=stream)

    without, with_memory = _answers(llm_stub)
    assert "bees in Turin" not in json.dumps(without["messages"])
    assert without["messages"][0]["content"].startswith(SYSTEM)
    assert "bees in Turin" in with_memory["messages"][-1]["content"]
    off_reply, on_reply = Message.objects.filter(role="assistant").order_by("pk")
    deadline = time.monotonic() + 45  # background work: a reflection and a title
    while TRACE_KEY not in on_reply.trace and time.monotonic() < deadline:
        time.sleep(0.2)
        on_reply.refresh_from_db()
    assert TRACE_KEY in on_reply.trace  # the worker reflected on the other reply meanwhile
    off_reply.refresh_from_db()
    assert TRACE_KEY not in off_reply.trace
    # Naming a conversation is not learning: the one with memory off gets its title too.
    while not Conversation.objects.get(pk=off_reply.conversation_id).title:
        assert time.monotonic() < deadline, "the memory-off conversation got no title"
        time.sleep(0.2)


def test_another_users_identical_history_never_lands_in_alices_conversation(
    client_for, user, other_user, llm_stub
):
    llm_stub.script({"content": "Hello."}, {"content": "Hello."}, {"content": "Bye."})
    history = [{"role": "user", "content": "Hi"}]
    answer, _ = _ask(client_for(user), history, stream=False)
    history.append({"role": "assistant", "content": answer})
    mallory = client_for(other_user)
    _ask(mallory, [{"role": "user", "content": "Hi"}], stream=False)
    _ask(mallory, [*history, {"role": "user", "content": "What did I say?"}], stream=False)

    alices = Conversation.objects.get(owner=user)
    assert alices.messages.count() == 2
    assert Conversation.objects.filter(owner=other_user).count() == 1
    assert Message.objects.filter(conversation__owner=other_user).count() == 4


def test_an_edited_history_is_the_prompt_and_starts_a_new_conversation(client_for, user, llm_stub):
    client = client_for(user)
    answer, _ = _ask(client, [{"role": "user", "content": "Hi"}], stream=False)
    edited = [
        {"role": "user", "content": "Hello instead"},
        {"role": "assistant", "content": "Something else"},
        {"role": "user", "content": "Go on"},
    ]
    _ask(client, edited, stream=False)

    prompt = _answers(llm_stub)[-1]["messages"]
    assert [m["content"] for m in prompt[1:]] == ["Hello instead", "Something else", "Go on"]
    assert Conversation.objects.filter(owner=user).count() == 2


def test_a_model_the_server_does_not_list_is_not_found(client_for, user, llm_stub):
    # Any name would otherwise be budgeted as the chat model and become a metrics label.
    with pytest.raises(openai.NotFoundError, match="lists"):
        client_for(user).chat.completions.create(
            model="thalamus/no-such-model", messages=[{"role": "user", "content": "hi"}]
        )
    assert not [r for r in llm_stub.requests if r["path"].endswith("/chat/completions")]


def _without_note(content: str) -> str:
    """A message as the client wrote it, without the note memory added before it."""
    return content.split(f"{NOTE_CLOSE}\n\n", 1)[-1]


def test_the_users_settings_read_with_the_key_shape_the_answer(client_for, user, llm_stub):
    """The settings come with the key in one statement: custom instructions reach the prompt,
    a user without saved settings gets the defaults, and memory turned off in the settings
    (not by the call's header) reads no memory."""
    from apps.accounts.services import user_settings_update

    memory_node_create(owner=user, description="Alice keeps bees in Turin", source="admin")
    client = client_for(user)
    _ask(client, [{"role": "user", "content": "Where do my bees live?"}], stream=True)
    user_settings_update(user=user, about_me="I am a nurse in Lyon.")
    _ask(client, [{"role": "user", "content": "Where are my bees kept?"}], stream=True)
    user_settings_update(user=user, memory_enabled=False)
    _ask(client, [{"role": "user", "content": "Where are the bees?"}], stream=False)

    defaults, instructed, off = (json.dumps(body["messages"]) for body in _answers(llm_stub))
    assert "bees in Turin" in defaults and "nurse in Lyon" not in defaults
    assert "bees in Turin" in instructed and "nurse in Lyon" in instructed
    assert "bees in Turin" not in off and "nurse in Lyon" in off


def test_a_conversation_continued_by_its_history_answers_with_the_model_picked_for_it(
    client_for, user, llm_stub
):
    """The pick comes with the conversation the history matched (no second read); a picked
    model is still checked against the models offered."""
    from django.core.cache import cache

    from apps.chat.conversation_services import conversation_model_pick
    from apps.core.llm.servers import models_key

    served = list(llm_stub.models)
    llm_stub.models[:] = [*served, "demo"]
    cache.delete(models_key(llm_stub.url))
    try:
        client = client_for(user)
        history = [{"role": "user", "content": "Hi"}]
        answer, _ = _ask(client, history, stream=True)
        conversation_model_pick(conversation=Conversation.objects.get(owner=user), model="demo")
        history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Again"}]
        _ask(client, history, stream=True)
    finally:
        llm_stub.models[:] = served
        cache.delete(models_key(llm_stub.url))

    assert [body["model"] for body in _answers(llm_stub)][1] == "demo"
    assert _answers(llm_stub)[0]["model"] != "demo"
    assert Conversation.objects.get(owner=user).messages.count() == 4
