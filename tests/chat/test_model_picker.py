"""The chat model picker (issue #28, item 3): the chat models the endpoint lists, never an
embedding model, within what the admin allows; remembered per conversation and used by its
answers; the configured model alone when the endpoint cannot be asked."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.urls import reverse

from apps.accounts.services import api_key_create
from apps.chat import conversation_services, services
from apps.chat.models import Conversation, Message
from apps.cognition.pipeline import answer_saved_reply
from apps.core.llm.chat_models import chat_models
from apps.core.llm.servers import models_key
from apps.core.ports import free_port
from tests.chat.conftest import connect_socket, receive_until, send_action

pytestmark = pytest.mark.django_db(transaction=True)

CONFIGURED = settings.THALAMUS_CHAT_MODEL
SERVED = (
    CONFIGURED,
    settings.THALAMUS_EMBED_MODEL,
    "demo",
    "bge-m3",
    "llama3.2:3b",
    "text-embedding-3-small",
    "jina-reranker-v2",
)


@pytest.fixture
def served(llm_stub):
    """The stub lists these models (the list is cached: forget it before and after)."""
    before = list(llm_stub.models)

    def serve(*names: str) -> None:
        llm_stub.models[:] = names
        cache.delete(models_key(llm_stub.url))

    serve(*SERVED)
    yield serve
    llm_stub.models[:] = before
    cache.delete(models_key(llm_stub.url))


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user)


def _chat_requests(llm_stub) -> list[dict]:
    return [r["body"] for r in llm_stub.requests if r["path"] == "/v1/chat/completions"]


def test_the_picker_offers_the_listed_chat_models_and_no_embedding_model(served):
    assert chat_models() == [CONFIGURED, "demo", "llama3.2:3b"]


def test_the_admin_narrows_the_picker_and_the_configured_model_stays(served, config):
    config(allowed_chat_models="demo\nnot-served\nbge-m3\n")

    assert chat_models() == [CONFIGURED, "demo"]


def test_an_endpoint_that_cannot_be_asked_leaves_the_configured_model_alone(served, config):
    config(llm_base_url=f"http://127.0.0.1:{free_port()}/v1")

    assert chat_models() == [CONFIGURED]


def test_the_page_offers_the_models_and_a_pick_survives_a_reload(
    client, user, conversation, served
):
    client.force_login(user)
    page = reverse("chat:conversation", args=[conversation.pk])
    first = client.get(page).content.decode()

    picker = first[first.index('id="chat-model"') :].split("</select>")[0]
    assert picker.count("<option") == 3
    assert f'<option value="{CONFIGURED}" selected>' in first
    assert "bge-m3" not in first and "nomic-embed-text" not in first

    picked = client.post(reverse("chat:model", args=[conversation.pk]), {"chat_model": "demo"})
    assert picked.status_code == 302
    conversation.refresh_from_db()
    assert conversation.chat_model == "demo"
    assert '<option value="demo" selected>' in client.get(page).content.decode()

    client.post(reverse("chat:model", args=[conversation.pk]), {"chat_model": CONFIGURED})
    conversation.refresh_from_db()
    assert conversation.chat_model == ""


@pytest.mark.parametrize("model", ["bge-m3", settings.THALAMUS_EMBED_MODEL, "gpt-9", ""])
def test_a_model_not_offered_is_refused(client, user, conversation, served, model):
    client.force_login(user)

    response = client.post(
        reverse("chat:model", args=[conversation.pk]), {"chat_model": model}, HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 400
    conversation.refresh_from_db()
    assert conversation.chat_model == ""


def test_another_users_conversation_cannot_be_given_a_model(
    client, user, other_user, conversation, served
):
    client.force_login(other_user)

    response = client.post(reverse("chat:model", args=[conversation.pk]), {"chat_model": "demo"})

    assert response.status_code == 404
    conversation.refresh_from_db()
    assert conversation.chat_model == ""


async def test_the_pick_answers_over_the_socket_and_the_reply_names_it(
    user, conversation, llm_stub, served
):
    await sync_to_async(conversation_services.conversation_model_pick)(
        conversation=conversation, model="demo"
    )
    llm_stub.script({"content": "Rome is in Italy."})
    communicator = await connect_socket(user, conversation.pk)

    await send_action(communicator, content="Where is Rome?")
    frames = await receive_until(communicator, "msg-assistant complete")

    reply = await Message.objects.aget(role="assistant")
    assert [body["model"] for body in _chat_requests(llm_stub)] == ["demo"]
    assert reply.model == "demo"
    # The status line under the answer names the model that wrote it.
    assert '<span class="turn-name">' in frames[-1]
    assert 'data-subsystem="llm"><span class="turn-name">LLM</span> demo' in frames[-1]
    await communicator.disconnect()


async def test_a_retry_uses_the_pick_and_a_pick_the_admin_withdrew_falls_back(
    user, conversation, llm_stub, served, config
):
    conversation.chat_model = "llama3.2:3b"
    await conversation.asave(update_fields=["chat_model"])
    await sync_to_async(config)(turns_per_minute=0)
    sent = await sync_to_async(services.message_send)(conversation=conversation, content="Hi")
    async for _ in answer_saved_reply(reply_id=sent.reply.pk):
        pass

    await sync_to_async(config)(allowed_chat_models="demo")
    again = await sync_to_async(services.message_send)(conversation=conversation, content="Hi")
    async for _ in answer_saved_reply(reply_id=again.reply.pk):
        pass

    assert [body["model"] for body in _chat_requests(llm_stub)] == ["llama3.2:3b", CONFIGURED]


def test_the_apis_model_list_has_no_embedding_model(client, user, served):
    _, secret = api_key_create(user=user, name="tests")

    listed = client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {secret}").json()

    assert [entry["id"] for entry in listed["data"]] == [
        "thalamus",
        f"thalamus/{CONFIGURED}",
        "thalamus/demo",
        "thalamus/llama3.2:3b",
    ]


def test_the_api_refuses_an_embedding_model_as_the_chat_model(client, user, served):
    _, secret = api_key_create(user=user, name="tests")

    response = client.post(
        "/v1/chat/completions",
        {"model": "thalamus/bge-m3", "messages": [{"role": "user", "content": "Hi"}]},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "model_not_found"
