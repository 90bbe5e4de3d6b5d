"""The user's settings, honoured by the turn: memory off, custom instructions, the knowledge
block's language, the time zone (issue #15, item 3)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from apps.accounts import services as account_services
from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition.pipeline import prepare_saved_reply, start_turn
from apps.cognition.turn_request import turn_history
from apps.cognition.world import WORLD_QUEUED
from apps.core.models import RuntimeConfig
from apps.core.services import runtime_config_save
from apps.memory import graph_services
from apps.memory import services as memory_services
from apps.memory.selectors import world_state_for
from tests.spotlight import unmarked

pytestmark = pytest.mark.django_db


def _reply(user, text: str, *, temporary: bool = False) -> Message:
    conversation = Conversation.objects.create(owner=user, temporary=temporary)
    return services.message_send(conversation=conversation, content=text).reply


def _system(turn) -> str:
    return turn.messages[0]["content"]


def _prompt(turn) -> str:
    """Everything the model is sent: the system prompt, and the note memory adds to the
    message."""
    return "\n".join(message["content"] for message in turn.messages)


def _embedding_requests(llm_stub) -> list[dict]:
    return [r for r in llm_stub.requests if r["path"].endswith("/embeddings")]


def _chat_requests(llm_stub) -> list[dict]:
    return [r for r in llm_stub.requests if r["path"].endswith("/chat/completions")]


def _remember_espresso(user) -> None:
    memory_services.memory_node_create(
        owner=user, description="The user loves espresso", source="admin"
    )
    graph_services.triple_upsert(owner=user, subject="user", predicate="likes", object="espresso")


def test_with_memory_on_the_turn_embeds_the_message_and_shows_what_it_remembers(user, llm_stub):
    _remember_espresso(user)
    reply = _reply(user, "Hello!")
    asked_before = len(_embedding_requests(llm_stub))

    turn = prepare_saved_reply(reply_id=reply.pk)

    assert len(_embedding_requests(llm_stub)) > asked_before
    assert "espresso" in _prompt(turn)


def test_with_memory_off_the_turn_reads_no_memory_and_embeds_nothing(user, llm_stub):
    _remember_espresso(user)
    account_services.user_settings_update(user=user, memory_enabled=False)
    reply = _reply(user, "Hello!")
    asked_before = len(_embedding_requests(llm_stub))

    turn = prepare_saved_reply(reply_id=reply.pk)

    assert len(_embedding_requests(llm_stub)) == asked_before, "no embedding, no search"
    assert "espresso" not in _prompt(turn)
    assert turn.messages[-1]["content"] == "Hello!", "no note before the message"
    assert turn.trace["memory"]["off"] is True
    assert turn.trace["memory"]["memories"] == [] and turn.trace["memory"]["triples"] == []


def test_a_temporary_chat_reads_no_memory_even_with_memory_on(user, llm_stub):
    _remember_espresso(user)
    reply = _reply(user, "Hello!", temporary=True)
    asked_before = len(_embedding_requests(llm_stub))

    turn = prepare_saved_reply(reply_id=reply.pk)

    assert len(_embedding_requests(llm_stub)) == asked_before
    assert "espresso" not in _prompt(turn)


def test_with_memory_off_a_turn_routed_to_gather_looks_nothing_up(user, llm_stub, config):
    account_services.user_settings_update(user=user, memory_enabled=False)
    reply = _reply(user, "Do you remember what I said about my sister and the blue one?")

    turn = prepare_saved_reply(reply_id=reply.pk)

    assert turn.trace["route"]["route"] == "answer"
    assert turn.trace["route"]["reason"] == "memory is off for this chat"
    assert "tools" not in turn.trace
    assert _chat_requests(llm_stub) == [], "no tool loop was asked"


# A message only the router's model can route (no rule decides it).
UNDECIDED = "I wonder whether my sister would like the blue one"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("setting", ["memory_off", "temporary"])
def test_a_streamed_turn_with_memory_off_asks_no_llm_before_its_answer(
    user, llm_stub, config, setting
):
    config(router_model_enabled=True)
    if setting == "memory_off":
        account_services.user_settings_update(user=user, memory_enabled=False)
    reply = _reply(user, UNDECIDED, temporary=setting == "temporary")
    history = turn_history(reply=reply)

    async def prepare():
        run = start_turn(user=user, conversation=reply.conversation, text=UNDECIDED)
        return await run.prepare(reply=reply, history=history)

    prepared = async_to_sync(prepare)()

    assert prepared.trace["route"]["reason"] == "memory is off for this chat"
    assert _chat_requests(llm_stub) == [] and _embedding_requests(llm_stub) == []


@pytest.mark.django_db(transaction=True)
def test_with_memory_on_the_same_message_is_shown_to_the_world_modifier_after_its_answer(
    user, llm_stub, config
):
    config(router_model_enabled=True)
    reply = _reply(user, UNDECIDED)
    history = turn_history(reply=reply)

    async def prepare():
        run = start_turn(user=user, conversation=reply.conversation, text=UNDECIDED)
        return await run.prepare(reply=reply, history=history)

    prepared = async_to_sync(prepare)()

    assert prepared.trace["route"]["by"] == "rule" and prepared.trace[WORLD_QUEUED] is True
    assert _chat_requests(llm_stub) == [], "nothing is asked before the answer"


def test_with_memory_off_the_title_is_still_written(
    celery_worker, user, llm_stub, config, django_capture_on_commit_callbacks
):
    config(router_model_enabled=True, reflection_quiet_seconds=0)
    account_services.user_settings_update(user=user, memory_enabled=False)
    llm_stub.script({"content": "A Gift for My Sister", "match": "short title"})
    reply = _reply(user, UNDECIDED)

    prepare_saved_reply(reply_id=reply.pk)
    with django_capture_on_commit_callbacks(execute=True):
        services.message_finish(message=reply, status="complete", content="She might.")

    deadline = time.monotonic() + 45
    while not Conversation.objects.get(pk=reply.conversation_id).title:
        assert time.monotonic() < deadline, "the title task never ran"
        time.sleep(0.1)
    assert Conversation.objects.get(pk=reply.conversation_id).title == "A Gift for My Sister"
    assert len(_chat_requests(llm_stub)) == 1, "the title's, and no router's"


@pytest.mark.django_db(transaction=True)
def test_with_memory_off_the_world_modifier_changes_nothing(user, llm_stub):
    account_services.user_settings_update(user=user, memory_enabled=False)
    text = "I am starting a new project: a bakery in Turin, and my goal is to open in May"
    reply = _reply(user, text)
    history = turn_history(reply=reply)

    async def prepare():
        run = start_turn(user=user, conversation=reply.conversation, text=text)
        prepared = await run.prepare(reply=reply, history=history)
        return run, prepared

    run, prepared = async_to_sync(prepare)()

    assert prepared.trace["route"]["route"] == "answer"
    assert "world" not in prepared.trace and WORLD_QUEUED not in prepared.trace
    spans = {span["name"]: span for span in prepared.spans.as_trace()}
    assert spans["world"]["outcome"] == "skipped"
    assert world_state_for(user_id=user.pk).pk is None, "no world state was written"
    assert _chat_requests(llm_stub) == [], "the world modifier was not asked"
    assert _embedding_requests(llm_stub) == []


def test_custom_instructions_are_in_the_system_prompt(user, llm_stub):
    account_services.user_settings_update(
        user=user, about_me="I am a nurse in Lyon.", answer_style="Short, with code first."
    )
    reply = _reply(user, "Hello!")

    system = _system(prepare_saved_reply(reply_id=reply.pk))

    assert "About the user:\nI am a nurse in Lyon." in system
    assert "How to answer:\nShort, with code first." in system
    assert "{{" not in system


# Committed: the recall reads on pool threads, as in production.
@pytest.mark.django_db(transaction=True)
def test_custom_instructions_are_kept_when_the_window_drops_memories_and_history(user, llm_stub):
    runtime_config_save(
        config=RuntimeConfig(context_tokens=1024, answer_max_tokens=256, turns_per_minute=0)
    )
    account_services.user_settings_update(user=user, answer_style="Always answer in haiku.")
    for n in range(8):
        memory_services.memory_node_create(
            owner=user,
            description=f"Dog story {n}: " + "park walk " * 40,
            importance=0.5,
            source="admin",
        )
    conversation = Conversation.objects.create(owner=user)
    filler = " lorem ipsum" * 40
    for n in range(4):
        sent = services.message_send(conversation=conversation, content=f"dog {n}{filler}")
        services.message_finish(message=sent.reply, status="complete", content=f"ok {n}{filler}")
    reply = services.message_send(conversation=conversation, content="and my dog?").reply

    turn = prepare_saved_reply(reply_id=reply.pk)

    assert turn.trace["memory"]["dropped_for_budget"]["memories"] > 0
    assert turn.trace["history_dropped"] > 0
    assert "How to answer:\nAlways answer in haiku." in _system(turn)


def test_no_custom_instructions_leave_no_empty_headings(user, llm_stub):
    system = _system(prepare_saved_reply(reply_id=_reply(user, "Hello!").pk))

    assert "About the user:" not in system and "How to answer:" not in system


def test_the_knowledge_block_is_rendered_in_the_users_language(user, llm_stub):
    graph_services.predicate_upsert(
        name="lives_in", category="places", labels={"en": "lives in", "it": "vive a"}
    )
    graph_services.triple_upsert(owner=user, subject="user", predicate="lives_in", object="Roma")
    account_services.user_settings_update(user=user, knowledge_language="it")

    prompt = _prompt(prepare_saved_reply(reply_id=_reply(user, "Hello!").pk))

    assert "vive a" in unmarked(prompt) and "Roma" in prompt
    assert "lives in" not in prompt


def test_the_date_in_the_prompt_is_today_in_the_users_time_zone(user, llm_stub):
    # UTC+14 and UTC-11 are never on the same day, so one of them is always not the server's.
    for zone in ("Pacific/Kiritimati", "Pacific/Pago_Pago"):
        account_services.user_settings_update(user=user, time_zone=zone)
        reply = _reply(user, "Hello!")

        system = _system(prepare_saved_reply(reply_id=reply.pk))

        assert f"Today is {timezone.now().astimezone(ZoneInfo(zone)).date().isoformat()}." in (
            system
        )
    kiritimati = timezone.now().astimezone(ZoneInfo("Pacific/Kiritimati")).date()
    pago_pago = timezone.now().astimezone(ZoneInfo("Pacific/Pago_Pago")).date()
    # 25 hours apart: one day, or two between 10:00 and 11:00 UTC.
    assert kiritimati - pago_pago in (timedelta(days=1), timedelta(days=2))


def test_the_current_time_tool_tells_the_time_in_the_users_time_zone(user, llm_stub):
    account_services.user_settings_update(user=user, time_zone="Asia/Tokyo")
    llm_stub.script(
        {"tool_calls": [{"name": "current_time", "arguments": {}}]},
        {"content": "I have what I need."},
    )
    reply = _reply(user, "What time is it where I live, before I call my sister?")

    turn = prepare_saved_reply(reply_id=reply.pk)

    assert turn.trace["tools"]["calls"][0]["tool"] == "current_time"
    [evidence] = [e for e in turn.trace["tools"]["evidence"] if e["tool"] == "current_time"]
    assert "in Asia/Tokyo (UTC+09:00)" in evidence["text"]
    tokyo_now = datetime.now(ZoneInfo("Asia/Tokyo"))
    assert f"{tokyo_now:%H:}" in evidence["text"] or f"{tokyo_now:%d %B}" in evidence["text"]
    prompt = _prompt(turn)
    assert "in Asia/Tokyo (UTC+09:00)" in unmarked(prompt), "the evidence reached the prompt"
    assert "in Asia/Tokyo" not in prompt, "tool output is data: datamarked"
