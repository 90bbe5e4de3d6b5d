from __future__ import annotations

import json
import time

import pytest
from django_celery_beat.models import PeriodicTask

from apps.chat.models import Conversation
from apps.cognition.schemas import CriticVerdict, EpisodeSummary, stated_quotes_schema
from apps.core.demo import (
    DEMO_EVERY_SECONDS,
    DEMO_PROMOTION_THRESHOLD,
    DEMO_SCHEDULES,
    demo_pace_start,
    demo_pace_stop,
)
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config
from apps.memory import tasks as memory_tasks
from apps.memory.models import Critique, MemoryLink, MemoryNode, Triple
from llm_stub import StubServer, demo_statements, demo_structured_reply

ADA = "Hi! My name is Ada and I build synthesizers. I prefer tea."


def wait_for(predicate, timeout: float = 45.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def ask_demo(schema, prompt: str) -> dict:
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
    }
    return json.loads(demo_structured_reply(response_format, prompt))


def extract_prompt(*user_lines: str) -> str:
    """The reflection's extraction prompt (prompts/extract.txt) over these user messages."""
    lines = "\n".join(f"message_{index + 1}: {line}" for index, line in enumerate(user_lines))
    return f"The user wrote:\n{lines}\n\nCopy each sentence in which the user says something."


def ask_extraction(*user_lines: str) -> dict:
    schema = stated_quotes_schema(len(user_lines))
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
    }
    return json.loads(demo_structured_reply(response_format, extract_prompt(*user_lines)))


def critic_prompt(memory: str, user_line: str) -> str:
    return (
        f"The memory under review:\n[9] persona, topic name, key name: {memory}\n\n"
        "What is already known (id, kind, topic, text):\n(nothing yet)\n\n"
        f"The latest exchange:\nuser: {user_line}\nassistant: Hello!\n"
    )


# ------------------------------------------------------------------ statement extraction


@pytest.mark.parametrize(
    ("said", "description", "kind", "fact_key"),
    [
        ("My name is Ada.", "The user's name is Ada.", "persona", "name"),
        ("I build synthesizers.", "The user builds synthesizers.", "fact", "builds_synthesizers"),
        ("I prefer tea over coffee.", "The user prefers tea over coffee.", "preference", ""),
        ("I live in Berlin.", "The user lives in Berlin.", "persona", "home_city"),
        ("I work as a nurse.", "The user works as a nurse.", "persona", "occupation"),
        ("I really love hiking", "The user loves hiking.", "preference", "preference_hiking"),
        ("I hate rain!", "The user hates rain.", "preference", "preference_rain"),
        ("My favourite colour is blue.", "The user's favourite colour is blue.", "preference", ""),
        ("Ich heiße Hans.", "The user's name is Hans.", "persona", "name"),
        ("Mi chiamo Giulia e vivo a Roma.", "The user lives in Roma.", "persona", "home_city"),
        ("J’habite à Lyon.", "The user lives in Lyon.", "persona", "home_city"),
        ("Trabajo como enfermera.", "The user works as enfermera.", "persona", "occupation"),
    ],
)
def test_a_first_person_statement_becomes_a_third_person_memory(said, description, kind, fact_key):
    found = {statement.description: statement for statement in demo_statements(said)}
    assert description in found
    assert found[description].kind == kind
    assert found[description].quote == said
    if fact_key:
        assert found[description].fact_key == fact_key


@pytest.mark.parametrize(
    "said",
    [
        "Hello there!",
        "Do I like tea?",
        "You said I like tea.",
        "I like it.",
        "I think so.",
        "What do you know about Berlin?",
    ],
)
def test_questions_hearsay_and_empty_statements_are_not_remembered(said):
    assert demo_statements(said) == []


def test_the_demo_extraction_quotes_each_users_statements_under_its_message():
    reply = ask_extraction(ADA, "What is the capital of Norway?", "I live in Rome.")

    assert reply == {
        "message_1": ["My name is Ada and I build synthesizers.", "I prefer tea."],
        "message_2": [],
        "message_3": ["I live in Rome."],
    }


def test_the_demo_critic_upholds_what_the_user_said_and_doubts_the_rest():
    upheld = CriticVerdict.model_validate(
        ask_demo(CriticVerdict, critic_prompt("The user's name is Ada.", ADA))
    )
    doubted = CriticVerdict.model_validate(
        ask_demo(CriticVerdict, critic_prompt("The user's name is Eve.", ADA))
    )

    assert upheld.verdict == "withstands"
    assert "The user's name is Ada." in upheld.debate and "Against:" in upheld.debate
    assert "My name is Ada and I build synthesizers." in upheld.debate
    assert doubted.verdict == "fails"
    assert "The user's name is Eve." in doubted.debate


def test_the_demo_episode_summary_names_the_first_thing_the_user_said():
    transcript = f"user: {ADA}\nassistant: Hi!\nuser: I live in Rome.\nassistant: Nice."
    summary = EpisodeSummary.model_validate(ask_demo(EpisodeSummary, transcript))
    assert "My name is Ada" in summary.summary


def test_other_schemas_still_get_a_minimal_instance():
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "Other", "schema": stated_quotes_schema(1).model_json_schema()},
    }
    assert demo_structured_reply(response_format, extract_prompt(ADA)) is None


def test_the_model_named_demo_remembers_through_any_stub(llm_stub):
    from openai import OpenAI

    schema = stated_quotes_schema(1)
    client = OpenAI(base_url=llm_stub.url, api_key="x", max_retries=0)
    response = client.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": extract_prompt("I live in Rome.")}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
        },
    )
    reply = schema.model_validate_json(response.choices[0].message.content)
    assert reply.message_1 == ["I live in Rome."]


# ------------------------------------------------------------------------ demo pace


@pytest.mark.django_db
def test_the_demo_pace_adds_a_quick_schedule_and_a_reachable_threshold(default_schedules):
    normal = {task.name: task.interval_id for task in PeriodicTask.objects.all()}

    said = demo_pace_start()

    quick = PeriodicTask.objects.get(name__in=list(DEMO_SCHEDULES))
    assert quick.task == "memory.promote_and_link" and quick.enabled
    assert (quick.interval.every, quick.interval.period) == (DEMO_EVERY_SECONDS, "seconds")
    assert runtime_config().promotion_threshold == DEMO_PROMOTION_THRESHOLD
    assert any("promotion threshold 2" in line for line in said)
    for name, interval_id in normal.items():
        assert PeriodicTask.objects.get(name=name).interval_id == interval_id

    assert demo_pace_stop() == 1
    assert set(PeriodicTask.objects.values_list("name", flat=True)) == set(normal)


@pytest.mark.django_db
def test_the_demo_keeps_a_runtime_config_that_was_set_before(config):
    config(promotion_threshold=5)

    said = demo_pace_start()
    demo_pace_start()

    assert RuntimeConfig.objects.get().promotion_threshold == 5
    assert any("kept the runtime config's promotion threshold of 5" in line for line in said)
    assert PeriodicTask.objects.filter(name__in=list(DEMO_SCHEDULES)).count() == 1


# ---------------------------------------------------------------------- end to end


@pytest.fixture
def demo_stub():
    stub = StubServer(port=0, demo=True).start()
    yield stub
    stub.stop()


def test_a_demo_chat_forms_criticises_promotes_and_links_memories(
    celery_worker, client, user, config, demo_stub
):
    demo_pace_start()
    # Reflection starts once the conversation is quiet for a second, not the shipped 20.
    config(llm_base_url=demo_stub.url, reflection_quiet_seconds=1)
    client.force_login(user)
    conversation = Conversation.objects.create(owner=user)

    client.post(f"/c/{conversation.pk}/send", {"content": ADA})
    wait_for(lambda: Critique.objects.count() == 3)

    nodes = {node.description: node for node in MemoryNode.objects.filter(owner=user)}
    assert set(nodes) == {
        "The user's name is Ada",
        "The user builds synthesizers",
        "The user prefers tea",
    }
    name = nodes["The user's name is Ada"]
    assert name.source == MemoryNode.Source.USER
    assert name.quote == "My name is Ada"
    assert name.fact_key == "name"
    critique = Critique.objects.get(node=name)
    assert critique.verdict == "withstands" and "Ada" in critique.debate
    assert Triple.objects.filter(owner=user, object="Ada").exists()
    wait_for(lambda: MemoryNode.objects.filter(owner=user, confidence_score=2).count() == 3)

    memory_tasks.promote_and_link.delay().get(timeout=45)
    assert set(MemoryNode.objects.filter(owner=user).values_list("state", flat=True)) == {
        MemoryNode.State.PROMOTED
    }

    client.post(f"/c/{conversation.pk}/send", {"content": "I love green tea."})
    green_tea = wait_for(
        lambda: MemoryNode.objects.filter(
            description="The user loves green tea", confidence_score=2
        ).first()
    )
    memory_tasks.promote_and_link.delay().get(timeout=45)

    green_tea.refresh_from_db()
    assert green_tea.state == MemoryNode.State.PROMOTED
    assert MemoryLink.objects.filter(
        source=green_tea, target=nodes["The user prefers tea"], kind=MemoryLink.Kind.SIMILAR
    ).exists()


def test_the_demo_notice_says_it_is_the_demo_model_and_where_memories_show(client, user, settings):
    settings.THALAMUS_DEMO = True
    client.force_login(user)
    page = client.get("/dashboard/").content.decode()
    assert "replies come from the built-in demo model, not a real LLM" in page
    assert 'href="/dashboard/">Mind</a>' in page


def test_the_demo_model_sets_the_project_the_user_works_on_and_keeps_an_instruction():
    from apps.cognition.world import WorldOps

    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "WorldOps", "schema": WorldOps.model_json_schema()},
    }
    prompt = (
        "The user's new message:\nI'm working on a cedar garden shed. From now on, keep answers "
        "short.\n\nReply with a JSON object"
    )

    reply = WorldOps.model_validate_json(demo_structured_reply(response_format, prompt))

    assert [(op.op, op.path, op.value) for op in reply.ops] == [
        ("set", "project", "cedar garden shed"),
        ("append", "behaviour", "keep answers short"),
    ]


def test_the_demo_stub_lists_only_the_demo_model_so_the_picker_names_it(settings):
    from apps.core.demo import DEMO_CHAT_MODEL
    from apps.core.llm.chat_models import chat_models
    from apps.core.management.commands.up import demo_stub_command

    argv = demo_stub_command()
    models = [argv[n + 1] for n, arg in enumerate(argv) if arg == "--model"]
    assert models == [DEMO_CHAT_MODEL, settings.THALAMUS_EMBED_MODEL]
    # `up --demo` names the chat model the demo's; the stub it starts lists what argv says.
    settings.THALAMUS_CHAT_MODEL = DEMO_CHAT_MODEL
    stub = StubServer(dim=8, demo=True, models=models).start()
    try:
        assert chat_models(RuntimeConfig(llm_base_url=stub.url)) == [DEMO_CHAT_MODEL]
    finally:
        stub.stop()
