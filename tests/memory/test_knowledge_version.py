"""The turn's graph read kept in memory behind the database's knowledge versions (memory 0016):
whatever writes a triple or a predicate, the next turn's triples are what a fresh read finds."""

from __future__ import annotations

import random

import pytest
from django.db import connection, transaction
from django.utils import timezone

from apps.memory import graph_services, selectors
from apps.memory.models import Predicate, Triple

pytestmark = pytest.mark.django_db


def _shown(triples) -> list[tuple]:
    return [
        (
            t.id,
            t.owner_id,
            t.subject,
            t.predicate.name,
            t.predicate.label("en"),
            t.object,
            t.category,
            t.confidence,
        )
        for t in triples
    ]


def _fresh(user_id: int) -> list[tuple]:
    """The user's graph read straight from the tables, as the renderer orders it."""
    return _shown(selectors.knowledge_triples_for(user_id=user_id))


def _turn_graph(user_id: int) -> list[tuple]:
    return _shown(selectors.plan_and_knowledge(user_id=user_id, conversation_id=None)[1])


def _insert_sql(owner_id: int | None, predicate: Predicate, value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_triple (owner_id, subject, predicate_id, object, category, "
            " confidence, provenance, valid_from) VALUES (%s, 'user', %s, %s, 'knowledge', 0.5, "
            " '', now())",
            [owner_id, predicate.pk, value],
        )


def test_every_way_of_writing_the_graph_is_seen_by_the_next_turn(django_user_model):
    ada, bob = (
        django_user_model.objects.create_user(username=name, password="pw-unused-123")
        for name in ("ada", "bob")
    )
    owners = [ada, bob, None]
    likes = graph_services.predicate_upsert(name="likes")
    rng = random.Random(29)
    actions = [
        "upsert", "bulk", "sql", "confidence", "object", "close", "reopen", "move", "delete",
        "relabel", "rename", "provenance", "rollback",
    ]  # fmt: skip
    for step in range(80):
        owner = rng.choice(owners)
        current = Triple.objects.filter(valid_to=None)
        action = actions[step % len(actions)] if step < len(actions) else rng.choice(actions)
        if action == "upsert":
            graph_services.triple_upsert(
                owner=owner, subject="user", predicate="likes", object=f"x{step}"
            )
        elif action == "bulk":
            Triple.objects.bulk_create(
                [Triple(owner=owner, subject="user", predicate=likes, object=f"b{step}{i}")
                 for i in range(2)]
            )  # fmt: skip
        elif action == "sql":
            _insert_sql(owner.pk if owner else None, likes, f"raw {step}")
        elif action == "confidence":
            current.filter(pk__in=current.order_by("?").values("pk")[:2]).update(
                confidence=rng.random()
            )
        elif action == "object":
            triple = current.order_by("?").first()
            if triple is not None:
                triple.object = f"changed {step}"
                triple.save(update_fields=["object"])
        elif action == "close":
            current.filter(pk__in=current.order_by("?").values("pk")[:1]).update(
                valid_to=timezone.now()
            )
        elif action == "reopen":
            Triple.objects.filter(
                pk__in=Triple.objects.exclude(valid_to=None).values("pk")[:1]
            ).update(valid_to=None)
        elif action == "move":
            current.filter(pk__in=current.order_by("?").values("pk")[:1]).update(owner=owner)
        elif action == "delete":
            current.filter(pk__in=current.order_by("?").values("pk")[:1]).delete()
        elif action == "relabel":
            Predicate.objects.filter(pk=likes.pk).update(labels={"en": f"Likes ({step})"})
        elif action == "rename":
            Predicate.objects.filter(pk=likes.pk).update(name=f"likes_{step}")
        elif action == "provenance":  # not shown: no new read needed, nothing stale either
            current.update(provenance=f"seen {step}")
        else:
            with pytest.raises(RuntimeError), transaction.atomic():
                graph_services.triple_upsert(
                    owner=owner, subject="user", predicate="likes", object="v"
                )
                for user in (ada, bob):
                    assert _turn_graph(user.pk) == _fresh(user.pk)
                raise RuntimeError("rolled back")
        for user in (ada, bob):
            assert _turn_graph(user.pk) == _fresh(user.pk), f"after {action} at step {step}"
    assert Triple.objects.filter(valid_to=None).count() > 5  # the walk left a graph to show


def test_a_graph_nobody_changed_is_not_read_again(django_user_model):
    ada = django_user_model.objects.create_user(username="ada", password="pw-unused-123")
    bob = django_user_model.objects.create_user(username="bob", password="pw-unused-123")
    graph_services.triple_upsert(owner=ada, subject="user", predicate="lives_in", object="Porto")
    graph_services.triple_upsert(owner=None, subject="Porto", predicate="is_in", object="Portugal")
    first = selectors.plan_and_knowledge(user_id=ada.pk, conversation_id=None)[1]
    again = selectors.plan_and_knowledge(user_id=ada.pk, conversation_id=None)[1]
    assert [t.object for t in again] == ["Porto", "Portugal"]
    assert all(a is b for a, b in zip(first, again, strict=True))  # the same objects: not rebuilt

    # Another user's new fact leaves Ada's graph where it was; a global one moves it.
    graph_services.triple_upsert(owner=bob, subject="user", predicate="lives_in", object="Lyon")
    assert selectors.plan_and_knowledge(user_id=ada.pk, conversation_id=None)[1][0] is first[0]
    graph_services.triple_upsert(owner=None, subject="Lyon", predicate="is_in", object="France")
    moved = selectors.plan_and_knowledge(user_id=ada.pk, conversation_id=None)[1]
    assert [t.object for t in moved] == ["Porto", "Portugal", "France"]
    assert moved[0] is not first[0]


def test_an_unchanged_graph_costs_the_database_no_read_of_the_triples(django_user_model):
    ada = django_user_model.objects.create_user(username="ada", password="pw-unused-123")
    graph_services.triple_upsert(owner=ada, subject="user", predicate="lives_in", object="Porto")
    selectors.plan_and_knowledge(user_id=ada.pk, conversation_id=None)
    key = (connection.settings_dict["NAME"], ada.pk, 200)
    own, global_, _ = selectors._KNOWN_GRAPHS.get(key)
    params = {
        "conversation": None,
        "owner": ada.pk,
        "global_key": 0,
        "limit": 200,
        "own": own,
        "global": global_,
    }

    def explain(values: dict) -> str:
        with connection.cursor() as cursor:
            cursor.execute(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + selectors._PLAN_AND_KNOWLEDGE_SQL,
                values,
            )
            return "\n".join(row[0] for row in cursor.fetchall())

    def triple_scans(plan: str) -> list[str]:
        return [line for line in plan.splitlines() if " on memory_triple" in line]

    known = triple_scans(explain(params))
    unknown = triple_scans(explain({**params, "own": -1, "global": -1}))
    assert known and all("never executed" in line for line in known), known
    assert unknown and not any("never executed" in line for line in unknown), unknown


def test_the_process_keeps_a_bounded_number_of_graphs_dropping_the_least_recently_used():
    graphs = selectors._KnownGraphs(size=2)
    graphs.put(("db", 1, 200), (1, 1, []))
    graphs.put(("db", 2, 200), (2, 1, []))
    assert graphs.get(("db", 1, 200)) == (1, 1, [])  # used again: now the most recent
    graphs.put(("db", 3, 200), (3, 1, []))
    assert graphs.get(("db", 2, 200)) is None
    assert graphs.get(("db", 1, 200)) == (1, 1, [])
    assert graphs.get(("db", 3, 200)) == (3, 1, [])
