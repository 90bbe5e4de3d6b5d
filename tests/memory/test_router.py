from __future__ import annotations

import math

import pytest

from apps.chat.models import Conversation
from apps.cognition.context import memory_context_for_turn
from apps.memory import graph_services, services
from apps.memory.router import (
    FAMILIAR_COSINE,
    Route,
    message_language,
    recall_cue,
    route_turn,
    triple_match,
)
from llm_stub import embed_text


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


def test_a_close_memory_makes_the_message_familiar():
    memory = embed_text("my favourite colour is green", 64)
    message = embed_text("my favourite colour is green", 64)

    decision = route_turn(
        text="favourite colour green", best_memory_cosine=_cosine(memory, message)
    )

    assert decision.name == Route.FAMILIARITY
    assert "cosine 1.00" in decision.reason


def test_a_far_memory_leaves_the_message_unfamiliar_however_it_ranks():
    memory = embed_text("the dog is afraid of thunder", 64)
    message = embed_text("which train goes to Lisbon tomorrow", 64)
    cosine = _cosine(memory, message)
    assert cosine < FAMILIAR_COSINE

    # The best candidate of any query has fused score 1 after normalisation; the raw cosine
    # is what decides.
    decision = route_turn(text="which train goes to Lisbon tomorrow", best_memory_cosine=cosine)

    assert decision.name == Route.RECOLLECTION
    assert "weak familiarity" in decision.reason


def test_the_threshold_itself_is_familiar_and_just_below_it_is_not():
    assert route_turn(text="ok", best_memory_cosine=FAMILIAR_COSINE).name == Route.FAMILIARITY
    assert (
        route_turn(text="ok", best_memory_cosine=FAMILIAR_COSINE - 0.01).name == Route.RECOLLECTION
    )


def test_without_a_vector_the_message_is_not_familiar():
    decision = route_turn(text="ok", best_memory_cosine=None)

    assert decision.name == Route.RECOLLECTION


def test_a_message_that_names_a_known_fact_is_familiar_without_a_close_memory():
    match = triple_match(
        text="Any good walks near Lake Como?",
        triples=[("user", "Lake Como"), ("user", "Marcello")],
    )
    assert match == 1.0

    decision = route_turn(text="Any good walks near Lake Como?", best_memory_cosine=0.1,
                          best_triple_match=match)  # fmt: skip

    assert decision.name == Route.FAMILIARITY


def test_a_partly_named_fact_does_not_count_and_the_user_subject_is_left_out():
    assert triple_match(text="I like tea", triples=[("user", "green tea")]) == 0.5
    assert triple_match(text="How is Argo?", triples=[("Argo", "beagle")]) == 0.5
    assert triple_match(text="hello", triples=[]) == 0.0


@pytest.mark.parametrize(
    ("text", "language", "cue"),
    [
        ("Do you remember what we said about the trip?", "en", "remember"),
        ("What did I tell you yesterday?", "en", "did I"),
        ("Ti ricordi cosa abbiamo detto ieri?", "it", "Ti ricordi"),
        ("Cosa ho mangiato ieri?", "it", "ieri"),
        ("Was habe ich dir gestern gesagt?", "de", "gestern"),
        ("Erinnerst du dich an den Urlaub?", "de", "Erinnerst"),
        ("Qu'est-ce que j'ai mangé hier ?", "fr", "hier"),
        ("Tu te souviens de notre voyage ?", "fr", "souviens"),
        ("¿Qué te dije ayer?", "es", "ayer"),
        ("¿Te acuerdas de lo que hablamos?", "es", "Te acuerdas"),
    ],
)
def test_each_languages_recall_cues_fire_in_that_language(text, language, cue):
    assert message_language(text) == language
    assert recall_cue(text) == cue
    assert route_turn(text=text, best_memory_cosine=1.0).name == Route.RECOLLECTION


@pytest.mark.parametrize(
    "text",
    [
        "Ich bin hier",
        "Hier ist mein Hund",
        "Wir sind hier im Büro",
        "Haben wir noch Milch?",
        "Sono qui",
        "Je suis ici",
        "Estoy de acuerdo",
        "Estoy aquí",
        "I am here",
        "Hier",
        "Ricordami di comprare il latte domani",
    ],
)
def test_words_that_only_look_like_cues_do_not_send_to_recollection(text):
    assert recall_cue(text) is None
    assert route_turn(text=text, best_memory_cosine=1.0).name == Route.FAMILIARITY


def test_a_short_message_is_read_in_every_language():
    assert message_language("Yesterday?") is None
    assert recall_cue("Yesterday?") == "Yesterday"
    assert recall_cue("Gestern?") == "Gestern"


# Committed: the recall reads on pool threads, as in production.
@pytest.mark.django_db(transaction=True)
def test_the_turn_routes_on_raw_cosine_not_on_its_normalised_score(user, llm_stub):
    conversation = Conversation.objects.create(owner=user)
    services.memory_node_create(
        owner=user, description="Argo the dog fears thunder", source="admin"
    )

    familiar = memory_context_for_turn(
        user=user, conversation=conversation, text="Argo the dog fears thunder"
    )
    unfamiliar = memory_context_for_turn(
        user=user, conversation=conversation, text="which train goes to Lisbon tomorrow"
    )

    assert familiar.trace["route"] == "familiarity"
    assert "cosine 1.00" in familiar.trace["reason"]
    assert unfamiliar.trace["route"] == "recollection"
    assert "weak familiarity" in unfamiliar.trace["reason"]


@pytest.mark.django_db
def test_a_known_triple_makes_the_turn_familiar(user, llm_stub):
    conversation = Conversation.objects.create(owner=user)
    graph_services.triple_upsert(owner=user, subject="user", predicate="lives_in", object="Lisbon")

    context = memory_context_for_turn(
        user=user, conversation=conversation, text="Any good restaurants in Lisbon?"
    )

    assert context.trace["route"] == "familiarity"
    assert "known fact" in context.trace["reason"]
