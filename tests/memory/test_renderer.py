from __future__ import annotations

import pytest

from apps.memory import graph_services
from apps.memory.renderer import render_knowledge
from apps.memory.seeds import load_seed_truths
from apps.memory.selectors import knowledge_triples_for, plan_and_knowledge

pytestmark = pytest.mark.django_db


@pytest.fixture
def marcellos_graph(user, other_user):
    load_seed_truths()
    graph_services.triple_upsert(
        owner=user, subject="user", predicate="is_called", object="Marcello"
    )
    graph_services.triple_upsert(owner=user, subject="user", predicate="lives_in", object="Rome")
    graph_services.triple_upsert(owner=user, subject="user", predicate="loves", object="espresso")
    graph_services.triple_upsert(owner=user, subject="user", predicate="enjoys", object="jazz")
    graph_services.triple_upsert(
        owner=other_user, subject="user", predicate="name", object="Mallory"
    )
    return user


EXPECTED = {
    "en": ["Identity", "- Name: Marcello", "Places", "- Lives in: Rome", "Preferences",
           "- Likes: espresso, jazz", "General knowledge", "- Thalamus — Is: a self-hosted"],
    "it": ["Identità", "- Nome: Marcello", "Luoghi", "- Vive a: Rome", "Preferenze",
           "- Ama: espresso, jazz", "Conoscenze generali", "- Thalamus — È: a self-hosted"],
    "de": ["Identität", "- Name: Marcello", "Orte", "- Wohnt in: Rome", "Vorlieben",
           "- Mag: espresso, jazz", "Allgemeinwissen"],
    "fr": ["Identité", "- Nom: Marcello", "Lieux", "- Habite à: Rome", "Préférences",
           "- Aime: espresso, jazz", "Connaissances générales"],
    "es": ["Identidad", "- Nombre: Marcello", "Lugares", "- Vive en: Rome", "Preferencias",
           "- Le gusta: espresso, jazz", "Conocimiento general"],
}  # fmt: skip


@pytest.mark.parametrize("language", sorted(EXPECTED))
def test_the_users_graph_reads_as_labelled_lines_in_each_language(marcellos_graph, language):
    triples = knowledge_triples_for(user_id=marcellos_graph.pk)

    block = render_knowledge(triples=triples, language=language, user=marcellos_graph)

    position = -1
    for expected in EXPECTED[language]:
        found = block.find(expected)
        assert found > position, f"{expected!r} missing or out of order in:\n{block}"
        position = found
    assert "Mallory" not in block
    assert "has_name" not in block and "→" not in block


def test_categories_follow_the_ontology_not_insertion_order(user):
    load_seed_truths()
    graph_services.triple_upsert(owner=user, subject="user", predicate="likes", object="tea")
    graph_services.triple_upsert(owner=user, subject="user", predicate="has_name", object="Ada")

    block = render_knowledge(
        triples=knowledge_triples_for(user_id=user.pk), language="en", user=user
    )

    assert block.index("Identity") < block.index("Preferences")


def test_an_empty_graph_renders_nothing(user):
    assert render_knowledge(triples=[], language="it", user=user) == ""


def test_the_turns_one_statement_read_gives_the_same_graph(marcellos_graph, other_user):
    expected = list(knowledge_triples_for(user_id=marcellos_graph.pk))

    steps, triples = plan_and_knowledge(user_id=marcellos_graph.pk, conversation_id=None)

    assert steps is None
    assert [t.id for t in triples] == [t.id for t in expected]
    assert [(t.predicate.name, t.object, t.owner_id) for t in triples] == [
        (t.predicate.name, t.object, t.owner_id) for t in expected
    ]
    assert other_user.pk not in {t.owner_id for t in triples}
    for language in EXPECTED:
        assert render_knowledge(
            triples=triples, language=language, user=marcellos_graph
        ) == render_knowledge(triples=expected, language=language, user=marcellos_graph)
