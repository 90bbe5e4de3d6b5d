"""The chat model picker against a real llama.cpp server (issue #28, item 3): the models it
lists are read through the same door, and the pick answers."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.core.cache import cache

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition.pipeline import answer_saved_reply
from apps.core.llm.chat_models import chat_models, listed_chat_models
from apps.core.llm.servers import models_key
from bench._llama import MODEL_NAME

pytestmark = [pytest.mark.real_llm, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fresh_list(real_llm):
    cache.delete(models_key(real_llm.url))
    yield
    cache.delete(models_key(real_llm.url))


def test_the_real_servers_model_is_the_one_offered(on_real_llm, fresh_list):
    on_real_llm()

    assert listed_chat_models() == [MODEL_NAME]
    assert chat_models() == [MODEL_NAME]


async def test_a_pick_the_real_server_lists_answers(on_real_llm, fresh_list, user):
    # A short answer: the pick is what is tested (SmolLM2 left alone talks for minutes when loaded).
    await sync_to_async(on_real_llm)(
        chat_model="not-" + MODEL_NAME, answer_max_tokens=32, reflection_enabled=False
    )
    conversation = await Conversation.objects.acreate(owner=user, chat_model=MODEL_NAME)
    sent = await sync_to_async(services.message_send)(
        conversation=conversation, content="Say hello."
    )

    async for _ in answer_saved_reply(reply_id=sent.reply.pk):
        pass

    reply = await Message.objects.aget(pk=sent.reply.pk)
    assert reply.status == Message.Status.COMPLETE and reply.content.strip()
    assert reply.model == MODEL_NAME
