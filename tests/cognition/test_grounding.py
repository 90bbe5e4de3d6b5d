from __future__ import annotations

import pytest

from apps.cognition import grounding
from apps.cognition.reflection import reflect_on_message
from apps.memory import graph_services
from apps.memory import services as memory_services
from apps.memory.models import MemoryNode
from tests.cognition.conftest import reflection


def test_a_quote_is_found_whatever_its_case_spacing_and_quote_marks():
    said = "Well… I’ve  been VEGETARIAN since 2019, honestly."

    assert grounding.quote_found(quote="“I've been vegetarian since 2019”", text=said)
    assert not grounding.quote_found(quote="I have been vegetarian", text=said)
    assert not grounding.quote_found(quote="vegetarian", text=said)  # too short to prove it
    assert grounding.quote_found(quote="Vegetarian!", text="vegetarian")  # the whole message


def test_an_update_of_a_remembered_fact_is_supported_by_the_new_value():
    known = "The user lives in Milan"

    assert grounding.echoes("The user lives in Turin", known)
    assert grounding.supported_by(
        text="The user lives in Turin", source=known, said="Actually I moved to Turin"
    )
    assert not grounding.supported_by(
        text="The user lives in Milan", source=known, said="Where do I live?"
    )


pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def quiet(config):
    config(critic_enabled=False)


def _reflect(llm_stub, reply, *quotes) -> dict:
    llm_stub.script(reflection(*quotes))
    return reflect_on_message(message_id=reply.pk)


def test_the_users_own_words_with_a_true_quote_are_stored_as_theirs(user, turn, llm_stub, quiet):
    reply = turn("By the way, I’ve been vegetarian since 2019.", "Good to know!")

    _reflect(llm_stub, reply, "I’ve been vegetarian since 2019")

    node = MemoryNode.objects.get(owner=user)
    assert node.source == MemoryNode.Source.USER and node.confidence_score == 1
    assert node.quote == "I've been vegetarian since 2019"
    assert node.description == "The user has been vegetarian since 2019"


def test_a_quote_the_user_never_wrote_is_rejected_not_stored_as_inferred(
    user, turn, llm_stub, quiet
):
    reply = turn("I'm off to the gym, then dinner.", "Enjoy!")

    outcome = _reflect(llm_stub, reply, "I train every single day")

    assert not MemoryNode.objects.exists()
    assert outcome["rejected"] == [
        {"text": "I train every single day", "reason": "not in the user's messages"}
    ]


def test_what_the_assistant_said_or_saw_is_never_the_users(user, turn, llm_stub, quiet):
    recalled = memory_services.memory_node_create(
        owner=user, description="Has a dog named Rex who loves the beach", source="admin"
    )
    graph_services.triple_upsert(owner=user, subject="user", predicate="lives_in", object="Rome")
    # Long enough that no quote below is cut to the longest message's length.
    question = "What is the capital city of Australia, the big country down under?"
    reply = turn(question, "Canberra, a city planned in 1913.")
    echoes = [
        "Canberra, a city planned in 1913",  # the assistant's reply
        "a helpful assistant with a long-term memory",  # the system prompt
        "Has a dog named Rex",  # a recalled memory
        "Lives in: Rome",  # the knowledge block
    ]
    llm_stub.script(reflection(*echoes[:2]), reflection(*echoes[2:]))

    outcomes = [reflect_on_message(message_id=reply.pk)]
    again = turn(question, "Canberra, a city planned in 1913.")
    outcomes.append(reflect_on_message(message_id=again.pk))

    assert list(MemoryNode.objects.values_list("pk", flat=True)) == [recalled.pk]
    rejected = [item["text"] for outcome in outcomes for item in outcome["rejected"]]
    assert rejected == echoes
    prompts = [str(r["body"]["messages"]) for r in llm_stub.requests if "messages" in r["body"]]
    assert not any("Canberra" in prompt for prompt in prompts)


def test_a_user_who_says_what_the_assistant_said_is_remembered(user, turn, llm_stub, quiet):
    reply = turn(
        "I'm a nurse at the city hospital.",
        "So you're a nurse at the city hospital — demanding work!",
    )

    _reflect(llm_stub, reply, "a nurse at the city hospital")

    node = MemoryNode.objects.get(owner=user)
    assert node.description == "The user is a nurse at the city hospital"
