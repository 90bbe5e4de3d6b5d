from __future__ import annotations

import pytest

from apps.cognition import grounding
from apps.cognition.reflection import reflect_on_message
from apps.memory import services as memory_services
from apps.memory.models import MemoryNode
from tests.cognition.conftest import memory, reflection


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


def _reflect(llm_stub, reply, *memories) -> dict:
    llm_stub.script(reflection(memories=memories))
    return reflect_on_message(message_id=reply.pk)


def test_the_users_own_words_with_a_true_quote_are_stored_as_theirs(user, turn, llm_stub, quiet):
    reply = turn("By the way, I've been vegetarian since 2019.", "Good to know!")

    _reflect(
        llm_stub,
        reply,
        memory("The user is vegetarian", source="user", quote="I’ve been vegetarian since 2019"),
    )

    node = MemoryNode.objects.get(owner=user)
    assert node.source == MemoryNode.Source.USER and node.confidence_score == 1
    assert node.quote == "I’ve been vegetarian since 2019"


def test_a_memory_claimed_as_the_users_words_they_never_wrote_is_stored_as_inferred(
    user, turn, llm_stub, quiet
):
    reply = turn("I'm off to the gym, then dinner.", "Enjoy!")

    _reflect(
        llm_stub,
        reply,
        memory("The user trains every day", source="user", quote="I train every single day"),
    )

    node = MemoryNode.objects.get(owner=user)
    assert node.source == MemoryNode.Source.INFERRED and node.confidence_score == 0
    assert node.quote == ""


def test_an_echo_of_the_assistants_reply_is_not_stored(user, turn, llm_stub, quiet):
    reply = turn(
        "What is the capital of Australia?",
        "The capital of Australia is Canberra, a city planned in 1913.",
    )

    outcome = _reflect(
        llm_stub, reply, memory("The capital of Australia is Canberra, a city planned in 1913")
    )

    assert not MemoryNode.objects.exists()
    assert outcome["rejected"] == [
        {
            "text": "The capital of Australia is Canberra, a city planned in 1913",
            "reason": "echoes the assistant's reply",
        }
    ]


def test_an_echo_of_the_system_prompt_is_not_stored(user, turn, llm_stub, quiet):
    reply = turn("Who are you?", "I'm here to help.")

    outcome = _reflect(
        llm_stub,
        reply,
        memory(
            "Thalamus is a helpful assistant with a long-term memory of the person you talk to",
            source="user",
            quote="a helpful assistant with a long-term memory",
        ),
    )

    assert not MemoryNode.objects.exists()
    assert outcome["rejected"][0]["reason"] == "echoes the system prompt"


def test_an_echo_of_a_recalled_memory_is_not_stored(user, turn, llm_stub, quiet):
    recalled = memory_services.memory_node_create(
        owner=user, description="Has a dog named Rex who loves the beach"
    )
    MemoryNode.objects.filter(pk=recalled.pk).update(embedding=None)  # not among `known`
    reply = turn("Any weekend ideas?", "Maybe a beach day?")
    reply.trace = {"memory": {"memories": [{"id": recalled.pk, "description": "Has a dog"}]}}
    reply.save(update_fields=["trace"])

    outcome = _reflect(llm_stub, reply, memory("Has a dog named Rex who loves the beach"))

    assert list(MemoryNode.objects.values_list("pk", flat=True)) == [recalled.pk]
    assert outcome["rejected"][0]["reason"] == "repeats a remembered memory"


def test_an_echo_of_the_knowledge_block_is_not_stored(user, turn, llm_stub, quiet):
    memory_services.triple_upsert(owner=user, subject="user", predicate="lives_in", object="Rome")
    reply = turn("Where do I live again?", "In Rome!")

    outcome = _reflect(llm_stub, reply, memory("Lives in: Rome"))

    assert not MemoryNode.objects.exists()
    assert outcome["rejected"][0]["reason"] == "repeats the knowledge block"


def test_a_user_who_says_what_the_assistant_said_is_remembered(user, turn, llm_stub, quiet):
    reply = turn(
        "I'm a nurse at the city hospital.",
        "So you're a nurse at the city hospital — demanding work!",
    )

    _reflect(llm_stub, reply, memory("A nurse at the city hospital"))

    assert MemoryNode.objects.get(owner=user).description == "A nurse at the city hospital"
