from __future__ import annotations

import time

import pytest
from django.core.management import call_command
from django.db import connection

from apps.memory import embedding_services, episode_services, services
from apps.memory.embedding import EmbeddingConfigError, get_embedder
from apps.memory.models import EmbeddingStatus, Episode, MemoryNode


def _wait_for(predicate, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_a_memory_whose_embedding_fails_is_kept_and_embedded_by_the_worker(
    celery_worker, user, llm_stub
):
    llm_stub.script({"endpoint": "embeddings", "fault": "http_500"})

    node = services.memory_node_create(
        owner=user, description="Prefers window seats on trains", source="admin"
    )

    assert node.embedding_status == EmbeddingStatus.PENDING
    assert MemoryNode.objects.filter(pk=node.pk).exists()
    _wait_for(lambda: MemoryNode.objects.get(pk=node.pk).embedding_status == "ready")
    node.refresh_from_db()
    assert len(node.embedding) == 64
    assert node.embedding_model == get_embedder().marker


@pytest.mark.django_db
def test_filling_pending_embeddings_twice_is_harmless(user, llm_stub):
    node = services.memory_node_create(
        owner=user, description="Allergic to kiwi", embed=False, source="admin"
    )
    episode = episode_services.episode_create(
        owner=user, summary="Talked about allergies", embed=False
    )

    assert embedding_services.embeddings_fill_pending() == 2
    assert embedding_services.embeddings_fill_pending() == 0
    node.refresh_from_db()
    episode.refresh_from_db()
    assert node.embedding_status == episode.embedding_status == "ready"


@pytest.mark.django_db
def test_reembed_refreshes_vectors_made_by_another_model_and_resumes(user, llm_stub):
    nodes = [
        services.memory_node_create(owner=user, description=f"fact number {i}", source="admin")
        for i in range(5)
    ]
    MemoryNode.objects.filter(pk__in=[n.pk for n in nodes[:3]]).update(embedding_model="old:1")
    episode_services.episode_create(owner=user, summary="An episode", embed=False)
    requests_before = len(llm_stub.requests)

    call_command("reembed", batch_size=2)

    marker = get_embedder().marker
    assert set(MemoryNode.objects.values_list("embedding_model", flat=True)) == {marker}
    assert Episode.objects.get().embedding_status == "ready"
    # 3 stale nodes in batches of 2, then 1 episode: nothing already current is re-embedded.
    assert len(llm_stub.requests) - requests_before == 3
    call_command("reembed")
    assert len(llm_stub.requests) - requests_before == 3


@pytest.mark.django_db(transaction=True)
def test_reembed_resizes_the_vectors_after_a_dimension_change(user, llm_stub, settings):
    node = services.memory_node_create(owner=user, description="Speaks Portuguese", source="admin")
    settings.THALAMUS_EMBED_DIM = 32
    try:
        call_command("reembed")
        node.refresh_from_db()
        assert len(node.embedding) == 32
        assert node.embedding_model.endswith(":32")
    finally:
        with connection.cursor() as cursor:
            for table in ("memory_memorynode", "memory_episode"):
                cursor.execute(f"UPDATE {table} SET embedding = NULL")
                cursor.execute(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector(64)")


def test_the_local_embedder_needs_its_dimension(monkeypatch, settings):
    monkeypatch.setenv("THALAMUS_EMBEDDER", "local")

    with pytest.raises(EmbeddingConfigError, match="THALAMUS_EMBED_DIM=384"):
        get_embedder()


def test_an_unknown_embedder_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("THALAMUS_EMBEDDER", "magic")

    with pytest.raises(EmbeddingConfigError, match="openai or local"):
        get_embedder()
