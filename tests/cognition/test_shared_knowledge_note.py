"""The knowledge every user shares (triples with no owner, such as the seeded "Thalamus — Is: a
self-hosted chat assistant", and shared memories, such as the seeded one on who sees a user's
memories) reaches a message's note only when the message names it: sent on every first turn, it
was most of a new user's note and of what the server read before the first token (issue 38).
The user's own knowledge is in the note whatever the message says."""

from __future__ import annotations

import pytest

from apps.chat.models import Conversation
from apps.memory import embedding_services, graph_services
from apps.memory.seeds import load_seed_truths

pytestmark = pytest.mark.django_db(transaction=True)


def _note_of_the_answer(llm_stub, client, user, text: str) -> str:
    conversation = Conversation.objects.create(owner=user)
    llm_stub.script({"content": "Noted."})
    client.post(f"/c/{conversation.pk}/send", {"content": text})
    (messages,) = [
        request["body"]["messages"]
        for request in llm_stub.requests
        if request["path"].endswith("/chat/completions")
        and "You are Thalamus" in request["body"]["messages"][0]["content"]
        and text in request["body"]["messages"][-1]["content"]
    ]
    return messages[-1]["content"].removesuffix(text)


@pytest.fixture
def seeded(config, user, alice):
    config(critic_enabled=False, reflection_enabled=False, turns_per_minute=0)
    load_seed_truths()
    graph_services.triple_upsert(owner=user, subject="user", predicate="lives_in", object="Leeds")
    graph_services.triple_upsert(
        owner=None, subject="Leeds", predicate="is_a", object="a city in Yorkshire"
    )
    # The shared memories searchable by their vectors too, as the worker leaves them.
    embedding_services.embeddings_fill_pending()
    return user


def test_a_first_message_about_something_else_gets_none_of_the_shared_knowledge(
    seeded, alice, llm_stub
):
    note = _note_of_the_answer(
        llm_stub, alice, seeded, "hiya, been plumbing boilers all week, any tips for a cold?"
    )

    assert "Thalamus" not in note and "Yorkshire" not in note
    assert "Leeds" in note, "the user's own knowledge is in the note"


def test_a_message_naming_shared_knowledge_gets_it_and_only_it(seeded, alice, llm_stub):
    note = _note_of_the_answer(llm_stub, alice, seeded, "So what exactly is Thalamus?")

    assert "self-hosted" in note and "local" in note
    assert "Yorkshire" not in note


def test_shared_knowledge_of_the_users_own_city_comes_with_it(seeded, alice, llm_stub):
    note = _note_of_the_answer(llm_stub, alice, seeded, "Is it going to rain in Leeds today?")

    assert "Yorkshire" in note and "Thalamus" not in note


def test_a_shared_memory_comes_when_the_message_asks_about_it_not_as_the_nearest_vector(
    seeded, alice, llm_stub
):
    unrelated = _note_of_the_answer(
        llm_stub, alice, seeded, "hiya, name's Radek btw, moved here from Poznan"
    )
    asked = _note_of_the_answer(llm_stub, alice, seeded, "Can the admins see my memories?")

    assert "admins of a Thalamus can see them" not in unrelated
    assert "admins of a Thalamus can see them" in asked
