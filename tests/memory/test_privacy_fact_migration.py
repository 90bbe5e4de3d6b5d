"""Migration 0019 rewrites an installation's old privacy fact, and only that row."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("memory", "0018_state_labels_in_plain_words")
AFTER = ("memory", "0019_privacy_fact_says_admins_see")
migration = importlib.import_module("apps.memory.migrations.0019_privacy_fact_says_admins_see")


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    executor.loader.build_graph()
    return executor.loader.project_state([target]).apps


@pytest.fixture
def back_to_the_latest():
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_the_old_privacy_fact_is_rewritten_and_embedded_again(user, back_to_the_latest):
    old_apps = _migrate(BEFORE)
    MemoryNode = old_apps.get_model("memory", "MemoryNode")
    shared = MemoryNode.objects.create(
        description=migration.OLD, kind="persona", source="admin", embedding_status="ready"
    )
    # A user's memory with the same words is the user's, and stays as it is.
    own = MemoryNode.objects.create(
        owner_id=user.pk, description=migration.OLD, source="user", embedding_status="ready"
    )

    new_apps = _migrate(AFTER)
    MemoryNode = new_apps.get_model("memory", "MemoryNode")
    shared = MemoryNode.objects.get(pk=shared.pk)
    assert shared.description == migration.NEW
    assert "admins" in shared.description and shared.embedding_status == "pending"
    own = MemoryNode.objects.get(pk=own.pk)
    assert own.description == migration.OLD and own.embedding_status == "ready"
