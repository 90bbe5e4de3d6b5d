from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from apps.memory.models import MemoryNode, Predicate, Triple
from apps.memory.seeds import SeedTruthsError, load_seed_truths

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_outbound_in_atomic")]


def test_an_empty_graph_is_seeded_from_the_repository_file():
    result = load_seed_truths(only_if_empty=True)

    assert not result.skipped
    assert result.triples == Triple.objects.filter(owner=None).count() > 0
    assert result.facts == MemoryNode.objects.filter(owner=None).count() > 0
    assert Predicate.objects.get(name="has_name").aliases
    fact = MemoryNode.objects.filter(owner=None).first()
    assert fact.state == MemoryNode.State.PROMOTED
    assert fact.embedding_status == "pending"


def test_a_seeded_graph_is_not_seeded_twice_by_the_command_up_runs():
    first = io.StringIO()
    call_command("load_seed_truths", verbosity=0, stdout=first)
    before = (Triple.objects.count(), MemoryNode.objects.count())

    again = io.StringIO()
    call_command("load_seed_truths", verbosity=0, stdout=again)

    assert "triples" in first.getvalue() and "loaded" in first.getvalue()
    assert again.getvalue() == ""
    assert (Triple.objects.count(), MemoryNode.objects.count()) == before


def test_the_command_loads_the_file_named_by_the_environment(tmp_path, monkeypatch):
    seed = tmp_path / "truths.yaml"
    seed.write_text(
        "predicates:\n"
        "  - {name: capital_of, category: places, aliases: [is_capital_of]}\n"
        "triples:\n"
        "  - {subject: Rome, predicate: is_capital_of, object: Italy}\n"
    )
    monkeypatch.setenv("THALAMUS_SEED_TRUTHS", str(seed))

    call_command("load_seed_truths")

    triple = Triple.objects.get()
    assert (triple.subject, triple.predicate.name, triple.object) == ("Rome", "capital_of", "Italy")
    assert triple.category == "places"


def test_invalid_yaml_is_reported_with_its_line(tmp_path):
    seed = tmp_path / "broken.yaml"
    seed.write_text("triples:\n  - {subject: a, predicate: b, object: c}\n  - {subject: [oops\n")

    with pytest.raises(SeedTruthsError, match=r"broken\.yaml, line 4, column \d+: invalid YAML"):
        load_seed_truths(path=seed)
    assert not Triple.objects.exists()


def test_a_wrong_field_is_reported_with_its_line(tmp_path, monkeypatch):
    seed = tmp_path / "wrong.yaml"
    seed.write_text("facts:\n  - description: fine\n  - description: bad\n    importance: 7\n")
    monkeypatch.setenv("THALAMUS_SEED_TRUTHS", str(seed))

    with pytest.raises(CommandError, match=r"wrong\.yaml, line 4: facts\.1\.importance"):
        call_command("load_seed_truths")


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(SeedTruthsError, match="cannot read the seed file"):
        load_seed_truths(path=tmp_path / "nope.yaml")
