"""The world state: changed only through validated operations, rendered, kept current by
reflection, proposed by the world modifier's model, and edited in the browser and the admin."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from django.urls import reverse

from apps.chat.models import Conversation, Message
from apps.cognition.reflection import reflect_on_message
from apps.cognition.world import WorldOps, modify_world
from apps.core.llm.structured import schema_max_tokens
from apps.core.models import Event
from apps.memory import forget_services, world_services
from apps.memory.models import WorldState
from apps.memory.renderer import render_world
from apps.memory.selectors import world_state_for
from tests.cognition.conftest import reflection

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_outbound_in_atomic")]

LONG = "x" * 201


def _apply(user, *ops, source="test"):
    return world_services.world_apply(user_id=user.pk, ops=list(ops), source=source)


def _stored(user) -> dict:
    return WorldState.objects.get(owner=user).as_dict()


def test_valid_operations_apply_together_and_bump_the_version_once(user):
    change = _apply(
        user,
        {"op": "set", "path": "topics", "values": ["  sourdough  baking ", "Rome", "rome"]},
        {"op": "set", "path": "project", "value": "Bakery website"},
        {"op": "append", "path": "goals", "value": "Open the shop by June"},
        {"op": "append", "path": "behaviour", "value": "Keep answers short"},
    )

    assert change.rejected == [] and len(change.applied) == 4
    assert change.changed and change.version == 1 and change.error == ""
    assert _stored(user) == {
        "topics": ["sourdough baking", "Rome"],
        "project": "Bakery website",
        "goals": ["Open the shop by June"],
        "behaviour": ["Keep answers short"],
    }
    event = Event.objects.get(owner=user, kind=Event.Kind.EDIT)
    assert event.payload["action"] == "world" and event.payload["version"] == 1
    assert event.payload["source"] == "test" and len(event.payload["applied"]) == 4

    second = _apply(
        user,
        {"op": "remove", "path": "topics", "value": "ROME"},
        {"op": "remove", "path": "project"},
    )
    assert second.version == 2
    assert _stored(user)["topics"] == ["sourdough baking"] and _stored(user)["project"] == ""


def test_operations_that_change_nothing_leave_the_version(user):
    _apply(user, {"op": "set", "path": "project", "value": "Thesis"})

    change = _apply(user, {"op": "set", "path": "project", "value": "Thesis"})

    assert change.applied and not change.changed and change.version == 1
    assert Event.objects.filter(owner=user, kind=Event.Kind.EDIT).count() == 1


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"op": "set", "path": "mood", "value": "happy"}, "unknown path 'mood'"),
        ({"op": "replace", "path": "topics", "value": "x"}, "unknown operation 'replace'"),
        ({"op": "set", "path": "goals", "value": "one goal"}, "set on goals takes values"),
        ({"op": "append", "path": "project", "value": "Thesis"}, "project is a single value"),
        ({"op": "append", "path": "goals", "value": LONG}, "longer than 200 characters"),
        ({"op": "set", "path": "topics", "values": [f"t{n}" for n in range(9)]}, "at most 8"),
        ({"op": "append", "path": "behaviour", "value": "   "}, "an empty text"),
        ({"op": "append", "path": "topics"}, "append on topics needs a value"),
        ({"op": "remove", "path": "goals", "value": "never set"}, "'never set' is not in goals"),
        ({"op": "append", "path": "topics", "value": "bread"}, "'bread' is already in topics"),
        ({"op": "remove", "path": "project", "value": "Other"}, "the active project is 'Bakery'"),
        ("set topics to bread", "an operation must be an object"),
    ],
)
def test_a_rejected_operation_says_why_and_nothing_else_is_lost(user, bad, reason):
    _apply(
        user,
        {"op": "set", "path": "topics", "values": ["bread"]},
        {"op": "set", "path": "project", "value": "Bakery"},
    )

    change = _apply(user, bad, {"op": "append", "path": "goals", "value": "Sell bread"})

    assert [item["op"] for item in change.rejected] == [
        bad if isinstance(bad, dict) else {"op": bad}
    ]
    assert reason in change.rejected[0]["reason"]
    assert change.applied == [{"op": "append", "path": "goals", "value": "Sell bread"}]
    assert change.version == 2
    assert _stored(user) == {
        "topics": ["bread"],
        "project": "Bakery",
        "goals": ["Sell bread"],
        "behaviour": [],
    }


def test_a_full_list_takes_no_more_until_one_is_removed(user):
    _apply(user, {"op": "set", "path": "topics", "values": [f"topic {n}" for n in range(8)]})

    full = _apply(user, {"op": "append", "path": "topics", "value": "one more"})
    assert full.rejected[0]["reason"] == "topics already holds 8 items: remove one first"

    made_room = _apply(
        user,
        {"op": "remove", "path": "topics", "value": "topic 0"},
        {"op": "append", "path": "topics", "value": "one more"},
    )
    assert made_room.rejected == [] and _stored(user)["topics"][-1] == "one more"


def test_only_invalid_operations_create_no_row_and_no_event(user):
    change = _apply(user, {"op": "set", "path": "mood", "value": "happy"})

    assert change.rejected and change.version == 0 and not change.changed
    assert change.state.pk is None
    assert not WorldState.objects.exists() and not Event.objects.filter(owner=user).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_changes_are_serialised_and_none_is_lost(user):
    errors = []

    def append_goals(prefix: str) -> None:
        try:
            for n in range(5):
                _apply(user, {"op": "append", "path": "goals", "value": f"{prefix} {n}"})
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=append_goals, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    state = WorldState.objects.get(owner=user)
    assert sorted(state.goals) == sorted(f"{p} {n}" for p in "ab" for n in range(5))
    assert state.version == 10


def test_the_world_state_of_a_user_without_one_is_empty_and_unsaved(user):
    state = world_state_for(user_id=user.pk)
    assert state.pk is None and state.is_empty and state.version == 0
    assert render_world(state) == ""


def test_rendering_gives_one_labelled_line_per_part_in_the_chosen_language(user):
    _apply(
        user,
        {"op": "set", "path": "topics", "values": ["bread", "Rome"]},
        {"op": "set", "path": "project", "value": "Bakery"},
        {"op": "set", "path": "goals", "values": ["Open by June", "Hire a baker"]},
        {"op": "set", "path": "behaviour", "values": ["Answer in Italian"]},
    )
    state = world_state_for(user_id=user.pk)

    assert render_world(state) == (
        "Current topics: bread, Rome\n"
        "Active project: Bakery\n"
        "Goals: Open by June; Hire a baker\n"
        "How to answer: Answer in Italian"
    )
    assert render_world(state, language="it").startswith("Argomenti attuali: bread, Rome\n")
    assert render_world(state, language="xx").startswith("Current topics:")


def test_forgetting_everything_forgets_the_world_state(user, other_user):
    _apply(user, {"op": "set", "path": "project", "value": "Secret plan"})
    _apply(other_user, {"op": "set", "path": "project", "value": "Mallory's plan"})

    forget_services.memories_forget_of_owner(owner_id=user.pk)

    assert list(WorldState.objects.values_list("owner", flat=True)) == [other_user.pk]


# --- the world modifier's model ---------------------------------------------------------------


def _world_reply(*ops, reason="the user started a project"):
    return {"json": {"ops": list(ops), "reason": reason}, "match": "current situation"}


def test_the_world_modifier_applies_the_models_valid_operations_and_reports_the_rest(
    user, llm_stub
):
    _apply(user, {"op": "set", "path": "topics", "values": ["weather"]})
    llm_stub.script(
        _world_reply(
            {"op": "set", "path": "project", "value": "Garden shed"},
            {"op": "append", "path": "topics", "value": "carpentry"},
            {"op": "append", "path": "mood", "value": "cheerful"},
        )
    )

    change = modify_world(
        user_id=user.pk,
        question="I'm building a garden shed this month",
        history=[
            {"role": "user", "content": "Will it rain tomorrow?"},
            {"role": "assistant", "content": "Probably not."},
        ],
    )

    assert change.error == "" and change.reason == "the user started a project"
    assert [op["path"] for op in change.applied] == ["project", "topics"]
    assert change.rejected[0]["reason"].startswith("unknown path 'mood'")
    assert change.version == 2
    assert _stored(user)["project"] == "Garden shed"
    assert _stored(user)["topics"] == ["weather", "carpentry"]
    assert Event.objects.filter(owner=user).first().payload["source"] == "turn"
    request = llm_stub.requests[-1]["body"]
    assert request["response_format"]["json_schema"]["name"] == WorldOps.__name__
    prompt = request["messages"][-1]["content"]
    assert 'topics: ["weather"]' in prompt and "user: Will it rain tomorrow?" in prompt
    assert "I'm building a garden shed this month" in prompt
    assert request["max_tokens"] == schema_max_tokens(WorldOps) < 1024


def test_a_junk_reply_changes_nothing_and_says_why(user, llm_stub):
    _apply(user, {"op": "set", "path": "project", "value": "Thesis"})
    llm_stub.script("I think the project changed!", "Sorry, no JSON today.")

    change = modify_world(user_id=user.pk, question="I'm switching to a new project", history=[])

    assert change.applied == [] and not change.changed and change.version == 1
    assert change.error.startswith("The world state was left unchanged: the model failed")
    assert _stored(user)["project"] == "Thesis"
    assert len(llm_stub.requests) == 2  # the reply and one repair


def test_a_server_error_changes_nothing_and_says_why(user, llm_stub):
    llm_stub.script({"fault": "http_500"})

    change = modify_world(user_id=user.pk, question="From now on answer in French", history=[])

    assert change.applied == [] and change.version == 0 and change.state.pk is None
    assert change.error.startswith("The world state was left unchanged")
    assert "500" in change.error
    assert not WorldState.objects.exists()


# --- reflection keeps the topics current ------------------------------------------------------


def _reflected_turn(user, question: str, answer: str) -> Message:
    conversation = Conversation.objects.create(owner=user)
    asked = Message.objects.create(
        conversation=conversation, role=Message.Role.USER, content=question
    )
    return Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content=answer,
        reply_to=asked,
        status=Message.Status.COMPLETE,
    )


def test_reflection_leaves_the_world_state_alone(user, llm_stub, config):
    # Topics are no longer asked of the reflection's one small call: the world state keeps
    # what the world modifier set.
    config(critic_enabled=False)
    _apply(user, {"op": "set", "path": "topics", "values": ["bread"]})
    reply = _reflected_turn(user, "My sourdough starter died again", "Sorry to hear that!")
    llm_stub.script(reflection("My sourdough starter died again"))

    outcome = reflect_on_message(message_id=reply.pk)

    assert outcome["created"] and "topics" not in outcome
    assert world_state_for(user_id=user.pk).topics == ["bread"]


# --- the memory browser and the admin ---------------------------------------------------------


def test_the_browser_page_shows_my_world_state(alice, user, other_user):
    _apply(user, {"op": "set", "path": "project", "value": "Bakery website"})
    _apply(other_user, {"op": "set", "path": "project", "value": "Lock picking"})

    response = alice.get(reverse("memory:world"))

    body = response.content.decode()
    assert response.status_code == 200
    assert 'value="Bakery website"' in body and "Version 1" in body
    assert "Lock picking" not in body
    assert reverse("memory:world") in alice.get(reverse("memory:list")).content.decode()


def test_saving_the_browser_form_applies_it_through_the_operations(alice, user):
    response = alice.post(
        reverse("memory:world"),
        {
            "topics": "bread\n\n  Rome \n",
            "project": "Bakery",
            "goals": "Open by June",
            "behaviour": "Answer in Italian\nKeep it short",
        },
    )

    assert response.status_code == 302
    assert _stored(user) == {
        "topics": ["bread", "Rome"],
        "project": "Bakery",
        "goals": ["Open by June"],
        "behaviour": ["Answer in Italian", "Keep it short"],
    }
    event = Event.objects.get(owner=user, kind=Event.Kind.EDIT)
    assert event.payload["source"] == "browser" and event.payload["version"] == 1

    cleared = alice.post(
        reverse("memory:world"),
        {"topics": "", "project": "", "goals": "", "behaviour": ""},
        headers={"HX-Request": "true", "HX-Target": "world-state"},
    )
    assert cleared.status_code == 200 and "Saved." in cleared.content.decode()
    assert world_state_for(user_id=user.pk).is_empty


def test_a_rejected_field_shows_its_reason_beside_it_and_the_rest_is_saved(alice, user):
    response = alice.post(
        reverse("memory:world"),
        {
            "topics": "\n".join(f"topic {n}" for n in range(9)),
            "project": "Bakery",
            "goals": LONG,
            "behaviour": "",
        },
        headers={"HX-Request": "true", "HX-Target": "world-state"},
    )

    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith('<form method="post"')
    form = response.context["form"]
    assert form.errors["topics"] == ["topics holds at most 8 items"]
    assert form.errors["goals"] == ["a text in goals is longer than 200 characters"]
    assert "topics holds at most 8 items" in body and "Saved." not in body
    assert "topic 8" in body  # what was typed stays in the field to be corrected
    assert _stored(user) == {"topics": [], "project": "Bakery", "goals": [], "behaviour": []}


def test_another_user_can_neither_read_nor_change_my_world_state(client, user, other_user):
    _apply(user, {"op": "set", "path": "project", "value": "Alice's secret"})
    client.force_login(other_user)

    page = client.get(reverse("memory:world")).content.decode()
    client.post(
        reverse("memory:world"),
        {"topics": "", "project": "Mallory's plan", "goals": "", "behaviour": ""},
    )

    assert "Alice's secret" not in page and "Alice&#x27;s secret" not in page
    assert _stored(user)["project"] == "Alice's secret"
    assert _stored(other_user)["project"] == "Mallory's plan"
    assert not Event.objects.filter(owner=user, payload__source="browser").exists()


def test_the_admin_edits_a_world_state_through_the_same_rules(admin_client, user):
    _apply(user, {"op": "set", "path": "topics", "values": ["bread"]})
    state = WorldState.objects.get(owner=user)
    url = reverse("admin:memory_worldstate_change", args=[state.pk])

    page = admin_client.get(url)
    assert page.status_code == 200 and "bread" in page.content.decode()
    assert admin_client.get(reverse("admin:memory_worldstate_changelist")).status_code == 200

    refused = admin_client.post(
        url, {"topics": "bread", "project": LONG, "goals": "", "behaviour": ""}
    )
    assert refused.status_code == 200
    assert "longer than 200 characters" in refused.content.decode()
    assert WorldState.objects.get(pk=state.pk).version == 1

    saved = admin_client.post(
        url, {"topics": "bread\ncakes", "project": "Bakery", "goals": "", "behaviour": ""}
    )
    assert saved.status_code == 302
    state.refresh_from_db()
    assert state.topics == ["bread", "cakes"] and state.project == "Bakery"
    assert state.version == 2
    assert Event.objects.filter(owner=user, payload__source="admin").count() == 1


def test_the_admin_adds_a_world_state_for_a_user(admin_client, user):
    response = admin_client.post(
        reverse("admin:memory_worldstate_add"),
        {"owner": user.pk, "topics": "", "project": "Thesis", "goals": "Submit", "behaviour": ""},
    )

    assert response.status_code == 302
    assert _stored(user)["project"] == "Thesis" and _stored(user)["goals"] == ["Submit"]


def test_the_world_ops_schema_lists_the_allowed_operations_and_paths():
    schema = json.dumps(WorldOps.model_json_schema())
    for word in ("set", "append", "remove", "topics", "project", "goals", "behaviour"):
        assert f'"{word}"' in schema


def test_what_the_model_proposed_is_labelled_until_the_user_saves_it_as_their_own(alice, user):
    _apply(user, {"op": "append", "path": "behaviour", "value": "Answer in rhymes"}, source="turn")
    assert world_state_for(user_id=user.pk).proposed == ["Answer in rhymes"]
    page = alice.get(reverse("memory:world")).content.decode()
    assert "Proposed by the assistant from what you said: Answer in rhymes." in page

    alice.post(
        reverse("memory:world"),
        {"topics": "", "project": "", "goals": "", "behaviour": "Answer in rhymes\nKeep it short"},
    )

    state = world_state_for(user_id=user.pk)
    assert (state.behaviour, state.proposed) == (["Answer in rhymes", "Keep it short"], [])
    assert "Proposed by the assistant" not in alice.get(reverse("memory:world")).content.decode()
