"""Embeddings from a server of their own: llama.cpp's server serves one model, so with it the
embedding model runs as a second server, named in the admin or by THALAMUS_EMBED_BASE_URL."""

from __future__ import annotations

import pytest

from apps.core.llm.limits import EMBEDDING, role_endpoint
from apps.memory.embedding import get_embedder
from apps.memory.services import memory_node_create
from llm_stub.server import StubServer

pytestmark = pytest.mark.django_db

SECRET = "sk-operator-secret"


@pytest.fixture
def embed_server():
    with StubServer(port=0) as server:
        yield server


def _embedding_requests(server) -> list[dict]:
    return [r for r in server.requests if r["path"].endswith("/embeddings")]


def test_by_default_embeddings_are_asked_of_the_chats_server(llm_stub, config):
    config(embed_base_url="")
    assert role_endpoint(EMBEDDING).base_url == llm_stub.url
    get_embedder().embed(["Alice keeps bees."])
    assert len(_embedding_requests(llm_stub)) == 1


def test_an_embedding_server_set_in_the_admin_gets_every_embedding_and_no_key(
    llm_stub, embed_server, config, settings
):
    settings.THALAMUS_LLM_API_KEY = SECRET
    config(embed_base_url=embed_server.url)
    node = memory_node_create(owner=None, description="Alice keeps bees in Turin.", source="admin")
    vectors = get_embedder().embed(["Where are the bees?"])

    assert node.embedding is not None and len(vectors[0]) == settings.THALAMUS_EMBED_DIM
    asked = _embedding_requests(embed_server)
    assert len(asked) == 2
    assert _embedding_requests(llm_stub) == []
    # The operator's key stays with the endpoints the environment names.
    assert {r["authorization"] for r in asked} == {"Bearer none"}


def test_an_embedding_server_named_in_the_environment_gets_the_operators_key(
    llm_stub, embed_server, config, settings
):
    settings.THALAMUS_LLM_API_KEY = SECRET
    settings.THALAMUS_EMBED_BASE_URL = embed_server.url
    config(embed_base_url="")
    get_embedder().embed(["Alice keeps bees."])
    asked = _embedding_requests(embed_server)
    assert [r["authorization"] for r in asked] == [f"Bearer {SECRET}"]
    assert _embedding_requests(llm_stub) == []


def test_the_admins_embedding_server_wins_over_the_environments(
    llm_stub, embed_server, config, settings
):
    settings.THALAMUS_EMBED_BASE_URL = "http://127.0.0.1:9/v1"
    config(embed_base_url=embed_server.url)
    assert role_endpoint(EMBEDDING).base_url == embed_server.url
    assert role_endpoint(EMBEDDING).model == settings.THALAMUS_EMBED_MODEL
