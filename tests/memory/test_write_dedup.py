"""A memory said again confirms the one held instead of adding a row (issue #29 item 5), by
every door that writes memories: the service itself, reflection (tests/cognition/
test_reflection_confirms.py), MCP's remember, the memory
file, the admin's add and the seeds; two workers writing one fact at once still make one row."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from apps.memory import browser_services, export_services, seeds, services
from apps.memory.models import MemoryNode

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_outbound_in_atomic")]


def _current(user) -> list[MemoryNode]:
    return list(MemoryNode.objects.filter(owner=user, valid_to=None).order_by("pk"))


def test_the_same_words_again_confirm_the_memory_instead_of_adding_one(user):
    first = services.memory_node_create(
        owner=user, description="The user likes hiking", embed=False, source="admin"
    )
    again = services.memory_node_create(
        owner=user, description="User likes hiking.", embed=False, source="admin"
    )

    assert again.pk == first.pk and again.restated is True
    (node,) = _current(user)
    assert node.description == "The user likes hiking"
    assert node.confidence_score == first.confidence_score + 1
    assert node.last_accessed_at is not None


def test_a_repeat_is_found_among_many_memories_sharing_its_words(user):
    first = services.memory_node_create(
        owner=user, description="The user's dog is Max", embed=False, source="admin"
    )
    MemoryNode.objects.bulk_create(
        MemoryNode(owner=user, description=f"The user's dog Max is fond of toy {n}")
        for n in range(80)
    )

    again = services.memory_node_create(
        owner=user, description="the user's dog is Max.", source="admin"
    )

    assert again.pk == first.pk and again.restated is True
    assert MemoryNode.objects.filter(owner=user).count() == 81


def test_one_word_apart_is_another_memory_even_with_the_same_vector(user):
    # all-MiniLM-L6-v2 puts these two at 0.992: the vector alone would merge them.
    vector = [1.0] + [0.0] * 63
    may_7 = "Caroline went to a LGBTQ support group on 7 May 2023"
    may_8 = "Caroline went to a LGBTQ support group on 8 May 2023"
    services.memory_node_create(owner=user, description=may_7, vector=vector, source="admin")
    other = services.memory_node_create(
        owner=user, description=may_8, vector=vector, source="admin"
    )

    assert not getattr(other, "restated", False)
    assert [n.description for n in _current(user)] == [may_7, may_8]


def test_the_same_words_reordered_merge_only_when_the_vectors_agree(user):
    near, far = [1.0] + [0.0] * 63, [0.0, 1.0] + [0.0] * 62
    first = services.memory_node_create(
        owner=user, description="Max is the user's dog", vector=near, source="admin"
    )
    apart = services.memory_node_create(
        owner=user, description="The user's dog is Max", vector=far, source="admin"
    )
    assert apart.pk != first.pk

    apart.delete()
    same = services.memory_node_create(
        owner=user, description="The user's dog is Max", vector=near, source="admin"
    )
    assert same.pk == first.pk and same.restated is True
    assert len(_current(user)) == 1


def test_the_same_value_of_a_fact_key_is_confirmed(user):
    first = services.memory_node_create(
        owner=user,
        description="The user lives in Rome",
        fact_key="home_city",
        embed=False,
        source="admin",
    )
    again = services.memory_node_create(
        owner=user,
        description="the user lives in  rome",
        fact_key="home_city",
        embed=False,
        source="admin",
    )

    assert again.pk == first.pk
    assert MemoryNode.objects.get(pk=first.pk).confidence_score == first.confidence_score + 1
    assert MemoryNode.objects.filter(owner=user).count() == 1


def test_another_users_memory_is_never_confirmed(user, other_user):
    services.memory_node_create(
        owner=other_user, description="Likes figs", embed=False, source="admin"
    )
    mine = services.memory_node_create(
        owner=user, description="Likes figs", embed=False, source="admin"
    )

    assert not getattr(mine, "restated", False)
    assert mine.owner_id == user.pk
    assert MemoryNode.objects.filter(description="Likes figs").count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_workers_writing_one_fact_at_once_make_one_row(user):
    start = threading.Barrier(4)
    made, errors = [], []

    def write():
        try:
            start.wait()
            node = services.memory_node_create(
                owner=user, description="Sofia is allergic to peanuts", embed=False, source="admin"
            )
            made.append(node.pk)
        except Exception as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)
        finally:
            connection.close()

    workers = [threading.Thread(target=write) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)

    assert errors == []
    assert len(set(made)) == 1 and len(made) == 4
    (node,) = _current(user)
    assert node.confidence_score == 1 + 3


def test_the_admins_add_confirms_a_memory_already_held(user):
    first = browser_services.memory_node_add(
        owner=user, description="Plays the cello", source="admin"
    )
    again = browser_services.memory_node_add(
        owner=user, description="plays the cello", source="admin"
    )

    assert again.pk == first.pk
    assert [n.pk for n in _current(user)] == [first.pk]
    assert MemoryNode.objects.get(pk=first.pk).confidence_score == first.confidence_score + 1


def test_a_memory_file_restating_a_memory_adds_nothing(user):
    services.memory_node_create(
        owner=user, description="The user likes hiking", embed=False, source="admin"
    )
    receipt = export_services.memories_import(
        owner=user, data={"memories": [{"description": "User likes hiking"}]}
    )

    assert len(_current(user)) == 1
    assert receipt.added["memories"] == 0


def test_the_seeds_loaded_twice_keep_one_row_per_fact():
    seeds.load_seed_truths()
    count = MemoryNode.objects.filter(owner=None).count()
    seeds.load_seed_truths()

    assert MemoryNode.objects.filter(owner=None).count() == count


def test_the_locomo_write_path_keeps_distinct_turns_and_writes_no_duplicates(tmp_path):
    """Each LoCoMo turn is its own memory, dated and named by speaker: two turns of the same
    words on other days, or by the other speaker, are not one memory said twice."""
    from apps.memory.evaluation import load_locomo, store_conversation

    said = [("Ada", "I ran a race."), ("Bruno", "I ran a race."), ("Ada", "Thanks!")]
    sample = {
        "sample_id": "dups",
        "conversation": {
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": who, "dia_id": f"D1:{n}", "text": text}
                for n, (who, text) in enumerate(said, 1)
            ],
            "session_2_date_time": "9:00 am on 2 June, 2023",
            "session_2": [{"speaker": "Ada", "dia_id": "D2:1", "text": "I ran a race."}],
        },
        "qa": [],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    [conversation] = load_locomo(path).conversations

    user, dia_ids = store_conversation(
        conversation=conversation, vectors=[None] * len(conversation.turns), marker="test"
    )

    nodes = _current(user)
    assert sorted(dia_ids.values()) == ["D1:1", "D1:2", "D1:3", "D2:1"]
    assert len(nodes) == 4
    for index, node in enumerate(nodes):
        for other in nodes[index + 1 :]:
            assert not services.says_the_same(node.description, other.description)
