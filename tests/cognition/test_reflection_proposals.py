"""A new value of a fact on one weak signal (the rules alone) waits: for the model's quote, a
second mention or the user's confirmation. And every memory says what found it."""

from __future__ import annotations

import pytest

from apps.chat.models import Message
from apps.cognition import remembering
from apps.cognition.reflection import reflect_on_message
from apps.core.models import Event
from apps.memory.models import MemoryNode, Triple
from tests.cognition.conftest import reflection

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = pytest.mark.usefixtures("no_outbound_in_atomic")


def _home(user) -> MemoryNode:
    return MemoryNode.objects.get(owner=user, fact_key="home_city", valid_to=None)


def _home_triples(user) -> list[str]:
    return list(
        Triple.objects.filter(owner=user, predicate__name="lives_in", valid_to=None).values_list(
            "object", flat=True
        )
    )


def _outcome(reply: Message) -> dict:
    return Message.objects.get(pk=reply.pk).trace["reflection"]


def _lives_in_gent(user, turn, llm_stub) -> MemoryNode:
    first = turn("I live in Gent", "Lovely city.")
    llm_stub.script(reflection("I live in Gent"))
    reflect_on_message(message_id=first.pk)
    return _home(user)


def _ghent_said_once(turn, llm_stub) -> Message:
    reply = turn("I live in Ghent", "Noted.")
    llm_stub.script(reflection())  # the model quotes nothing: the rules' signal alone
    reflect_on_message(message_id=reply.pk)
    return reply


def test_a_new_home_the_rules_alone_found_is_proposed_not_written(user, turn, llm_stub, config):
    config(critic_enabled=False)
    gent = _lives_in_gent(user, turn, llm_stub)
    reply = turn("I live in Ghent", "Noted.")
    llm_stub.script(reflection())  # the model quotes nothing: the rules' signal alone

    outcome = reflect_on_message(message_id=reply.pk)

    assert _home(user).description == "The user lives in Gent" and _home(user).pk == gent.pk
    assert _home_triples(user) == ["Gent"]
    assert outcome["updated"] == [] and outcome["triples"] == []
    [proposal] = outcome["proposed"]
    assert proposal["state"] == "pending" and proposal["replaces"] == gent.pk
    assert (proposal["description"], proposal["found_by"]) == ("The user lives in Ghent", "rules")
    perceived = Event.objects.get(owner=user, kind="perception", payload__message_id=reply.pk)
    assert perceived.summary == "Asked you about 1 change to what I knew."


def test_the_same_new_value_said_again_replaces_the_old_one_which_stays_as_history(
    user, turn, llm_stub, config
):
    config(critic_enabled=False)
    gent = _lives_in_gent(user, turn, llm_stub)
    once = _ghent_said_once(turn, llm_stub)
    again = turn("I live in Ghent", "Got it.")
    llm_stub.script(reflection())

    outcome = reflect_on_message(message_id=again.pk)

    home = _home(user)
    assert (home.pk, home.description) == (gent.pk, "The user lives in Ghent")
    assert outcome["updated"] == [gent.pk] and outcome["found_by"] == {str(gent.pk): "rules"}
    assert "proposed" not in outcome
    settled = _outcome(once)["proposed"][0]
    assert (settled["state"], settled["node"]) == ("said again", gent.pk)
    old = MemoryNode.objects.get(owner=user, fact_key="home_city", valid_to__isnull=False)
    assert old.description == "The user lives in Gent" and old.superseded_by_id == gent.pk
    assert "Ghent" in _home_triples(user)


def test_a_value_said_in_an_edited_away_message_is_no_first_mention(user, turn, llm_stub, config):
    config(critic_enabled=False)
    _lives_in_gent(user, turn, llm_stub)
    once = _ghent_said_once(turn, llm_stub)
    Message.objects.filter(pk=once.pk).update(active=False)

    again = _ghent_said_once(turn, llm_stub)

    assert _home(user).description == "The user lives in Gent"
    assert _outcome(again)["proposed"][0]["state"] == "pending"
    assert remembering.proposal_confirm(reply=Message.objects.get(pk=once.pk), index=0) is None


def test_a_different_value_said_next_is_proposed_on_its_own(user, turn, llm_stub, config):
    config(critic_enabled=False)
    _lives_in_gent(user, turn, llm_stub)
    for said in ("I live in Ghent", "I live in Bruges"):
        reply = turn(said, "Noted.")
        llm_stub.script(reflection())
        reflect_on_message(message_id=reply.pk)

    assert _home(user).description == "The user lives in Gent"
    assert _outcome(reply)["proposed"][0]["description"] == "The user lives in Bruges"


def test_a_new_value_the_model_quoted_too_replaces_the_old_one_at_once(
    user, turn, llm_stub, config
):
    config(critic_enabled=False)
    gent = _lives_in_gent(user, turn, llm_stub)
    reply = turn("I live in Ghent", "Noted.")
    llm_stub.script(reflection("I live in Ghent"))

    outcome = reflect_on_message(message_id=reply.pk)

    assert _home(user).description == "The user lives in Ghent"
    assert outcome["updated"] == [gent.pk] and outcome["found_by"] == {str(gent.pk): "both"}
    assert "Ghent" in _home_triples(user)


def test_confirming_a_proposal_replaces_the_old_value_once_and_says_why(
    user, turn, llm_stub, config
):
    config(critic_enabled=False)
    gent = _lives_in_gent(user, turn, llm_stub)
    reply = _ghent_said_once(turn, llm_stub)

    node = remembering.proposal_confirm(reply=Message.objects.get(pk=reply.pk), index=0)

    assert (node.pk, node.description) == (gent.pk, "The user lives in Ghent")
    assert "Ghent" in _home_triples(user)
    outcome = _outcome(reply)
    assert outcome["proposed"][0]["state"] == "confirmed" and outcome["updated"] == [gent.pk]
    edit = Event.objects.get(owner=user, kind="edit", payload__action="proposal_confirm")
    assert edit.summary == (
        "You confirmed it, so I updated what I knew: The user lives in Ghent"
        " (was: The user lives in Gent)"
    )
    # A second click settles nothing more.
    assert remembering.proposal_confirm(reply=Message.objects.get(pk=reply.pk), index=0) is None
    assert MemoryNode.objects.filter(owner=user, fact_key="home_city").count() == 2


def test_each_memory_names_what_found_it(user, turn, llm_stub, config):
    config(critic_enabled=False)
    reply = turn("I work as a nurse. I love jazz. Jazz makes my evenings.", "Nice.")
    llm_stub.script(reflection("I work as a nurse.", "Jazz makes my evenings."))

    outcome = reflect_on_message(message_id=reply.pk)

    by_text = {
        MemoryNode.objects.get(pk=int(pk)).description: by for pk, by in outcome["found_by"].items()
    }
    assert by_text == {
        "The user works as a nurse": "both",
        "The user loves jazz": "rules",
        "Jazz makes the user's evenings": "model",
    }


def test_a_message_that_takes_back_the_old_value_replaces_it_at_once(user, turn, llm_stub, config):
    config(critic_enabled=False)
    gent = _lives_in_gent(user, turn, llm_stub)
    reply = turn("sorry, I meant I live in Ghent", "Noted.")
    llm_stub.script(reflection())  # the rules alone, but the user takes back what they said

    outcome = reflect_on_message(message_id=reply.pk)

    home = _home(user)
    assert (home.pk, home.description) == (gent.pk, "The user lives in Ghent")
    assert outcome["updated"] == [gent.pk] and not outcome.get("proposed")
