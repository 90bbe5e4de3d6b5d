"""The database's count of each owner's current memories (memory 0012), which the recall reads
instead of counting a heavy owner's rows before every search: every way of writing a memory
keeps it equal to a real count."""

from __future__ import annotations

import random

import pytest
from django.db import connection
from django.utils import timezone

from apps.memory import search_selectors, services
from apps.memory.models import GLOBAL_COUNT_KEY, CurrentMemoryCount, MemoryNode

pytestmark = pytest.mark.django_db


def _real_counts() -> dict[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(owner_id, %s), count(*) FROM memory_memorynode "
            "WHERE valid_to IS NULL GROUP BY 1",
            [GLOBAL_COUNT_KEY],
        )
        return dict(cursor.fetchall())


def _kept_counts() -> dict[int, int]:
    return dict(CurrentMemoryCount.objects.exclude(rows=0).values_list("owner_key", "rows"))


def _insert_sql(owner_id: int | None, description: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_memorynode (owner_id, description, kind, topic, fact_key, state, "
            " confidence_score, importance, origin_context, embedding_status, embedding_model, "
            " created_at) "
            "VALUES (%s, %s, 'fact', '', '', 'volatile', 1, 0.5, '', 'pending', '', now())",
            [owner_id, description],
        )


def test_every_way_of_writing_memories_keeps_the_count(django_user_model):
    ada, bob, cy = (
        django_user_model.objects.create_user(username=name, password="pw-unused-123")
        for name in ("ada", "bob", "cy")
    )
    owners = [ada, bob, cy, None]
    rng = random.Random(12)
    for step in range(60):
        owner = rng.choice(owners)
        current = MemoryNode.objects.filter(valid_to=None)
        action = rng.choice(["create", "bulk", "sql", "supersede", "restore", "move", "delete"])
        if action == "create":
            services.memory_node_create(
                owner=owner, description=f"fact {step}", embed=False, source="admin"
            )
        elif action == "bulk":
            MemoryNode.objects.bulk_create(
                [MemoryNode(owner=owner, description=f"bulk {step} {i}") for i in range(3)]
            )
        elif action == "sql":
            _insert_sql(owner.pk if owner else None, f"raw {step}")
        elif action == "supersede":
            current.filter(pk__in=current.values("pk")[:2]).update(valid_to=timezone.now())
        elif action == "restore":
            MemoryNode.objects.filter(
                pk__in=MemoryNode.objects.exclude(valid_to=None).values("pk")[:1]
            ).update(valid_to=None)
        elif action == "move":
            node = current.order_by("?").first()
            if node is not None:
                node.owner = owner
                node.save(update_fields=["owner"])
        else:
            current.filter(pk__in=current.order_by("?").values("pk")[:2]).delete()
        assert _kept_counts() == _real_counts(), f"after {action} at step {step}"
    assert sum(_real_counts().values()) > 10  # the walk left memories to count


def test_copy_and_superseding_updates_are_counted(django_user_model):
    user = django_user_model.objects.create_user(username="copied", password="pw-unused-123")
    sql = (
        "COPY memory_memorynode (owner_id, description, kind, topic, fact_key, state, "
        "confidence_score, importance, origin_context, embedding_status, embedding_model, "
        "created_at) FROM STDIN"
    )
    connection.ensure_connection()
    now = timezone.now()
    with connection.connection.cursor() as cursor, cursor.copy(sql) as copy:
        for i in range(25):
            for owner, text in ((user.pk, f"copied {i}"), (None, f"global {i}")):
                row = (owner, text, "fact", "", "", "volatile", 1, 0.5, "", "pending", "", now)
                copy.write_row(row)
    # An update that leaves validity and owner alone moves nothing.
    MemoryNode.objects.filter(owner=user).update(importance=0.9, last_accessed_at=timezone.now())
    assert _kept_counts() == {user.pk: 25, GLOBAL_COUNT_KEY: 25} == _real_counts()
    # A fact's new value supersedes the old one: one current row, as before.
    for home in ("Lives in Rome", "Lives in Oslo"):
        services.memory_node_create(
            owner=user, description=home, fact_key="home", embed=False, source="admin"
        )
    assert _kept_counts()[user.pk] == 26 == _real_counts()[user.pk]


def test_truncate_empties_the_count(django_user_model):
    user = django_user_model.objects.create_user(username="cleared", password="pw-unused-123")
    _insert_sql(user.pk, "to be truncated")
    assert _kept_counts() == {user.pk: 1}
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the insert's deferred FK checks
        cursor.execute("TRUNCATE memory_memorynode CASCADE")
    assert _kept_counts() == {} == _real_counts()


def test_the_search_weighs_and_routes_by_the_kept_count(django_user_model, monkeypatch):
    user = django_user_model.objects.create_user(username="searcher", password="pw-unused-123")
    for i in range(4):
        _insert_sql(user.pk, f"own memory {i}")
    _insert_sql(None, "a global memory")
    match = search_selectors.memory_text_match(user_id=user.pk, text="memory", limit=5)
    assert match.params["visible"] == 5
    # Past the exact scan's limit the search takes the HNSW path, by the count alone.
    monkeypatch.setattr(search_selectors, "EXACT_SCAN_MAX_ROWS", 4)
    match = search_selectors.memory_text_match(user_id=user.pk, text="memory", limit=5)
    sql, _ = search_selectors.memory_ranking_query(match, vector=[0.1] * 8)
    assert "approximate AS MATERIALIZED" in sql
