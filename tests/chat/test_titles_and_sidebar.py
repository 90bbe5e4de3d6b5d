"""A conversation's title (the model's, else the user's first words), its rename reaching the
header, and the sidebar telling the conversations /v1 started from the chats of this site."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps.chat import conversation_services
from apps.chat.models import TITLE_FALLBACK_CHARS, Conversation, Message, fallback_title

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_client(client, user):
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    ("said", "title"),
    [
        ("Hi! My name is Laura.", "Hi! My name is Laura."),
        (
            "Hi! My name is Laura. I live in Lisbon and I love painting birds on Sundays.",
            "Hi! My name is Laura.",
        ),
        (
            "Could you help me plan a two-week trip through the north of Italy, next spring?",
            "Could you help me plan a two-week trip through the north of…",
        ),
        ("What's 2+2?\nAnd then, what's 3+3?", "What's 2+2?"),
        ("\n\n  Bonjour,   ça va ?  ", "Bonjour, ça va ?"),
    ],
)
def test_the_fallback_title_keeps_punctuation_and_ends_at_a_sentence_or_a_word(said, title):
    assert fallback_title(said) == title
    assert len(title) <= TITLE_FALLBACK_CHARS + 1


def test_a_model_without_a_title_names_the_chat_by_the_users_first_words(
    celery_worker, user, llm_stub
):
    from apps.chat.tasks import title_conversation

    llm_stub.script({"content": ""})  # nothing worth a title
    conversation = Conversation.objects.create(owner=user)
    said = "Hi! My name is Laura. I live in Lisbon and I love painting birds on Sundays."
    Message.objects.create(conversation=conversation, role="user", content=said)

    title_conversation.delay(conversation.pk).get(timeout=45)

    conversation.refresh_from_db()
    assert conversation.title == "Hi! My name is Laura."


def test_a_rename_on_its_own_page_also_changes_the_header_and_the_tab(alice_client, user):
    conversation = Conversation.objects.create(owner=user, title="Old name")
    other = Conversation.objects.create(owner=user, title="Elsewhere")
    url = reverse("chat:rename", args=[conversation.pk])

    here = alice_client.post(
        url,
        {"title": "Trip to Rome!"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://testserver/c/{conversation.pk}/",
    ).content.decode()
    elsewhere = alice_client.post(
        url,
        {"title": "Trip to Rome, again"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://testserver/c/{other.pk}/",
    ).content.decode()

    assert re.search(
        r'<h1 class="chat-title" id="chat-title" hx-swap-oob="true">\s*Trip to Rome!', here
    )
    assert "<title>Trip to Rome! · Thalamus</title>" in here
    assert f'id="conv-{conversation.pk}"' in elsewhere
    assert "chat-title" not in elsewhere and "<title>" not in elsewhere


def test_another_users_rename_is_a_404(client, user, other_user):
    conversation = Conversation.objects.create(owner=user, title="Mine")
    client.force_login(other_user)
    assert (
        client.post(reverse("chat:rename", args=[conversation.pk]), {"title": "x"}).status_code
        == 404
    )
    conversation.refresh_from_db()
    assert conversation.title == "Mine"


def _items(body: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<li id="conv-(\d+)"', body)]


def test_the_sidebar_marks_api_conversations_and_filters_them(alice_client, user, other_user):
    chats = [Conversation.objects.create(owner=user, title=f"chat {i}") for i in range(2)]
    api = [conversation_services.conversation_create(user=user, via_api=True) for _ in range(3)]
    conversation_services.conversation_create(user=other_user, via_api=True)

    everything = alice_client.get(reverse("home")).content.decode()
    only_api = alice_client.get(reverse("chat:list"), {"via": "api"}).content.decode()
    only_chats = alice_client.get(reverse("chat:list"), {"via": "chat"}).content.decode()

    assert sorted(_items(everything)) == sorted(c.pk for c in chats + api)
    assert everything.count('class="badge badge-api"') == 3
    assert sorted(_items(only_api)) == sorted(c.pk for c in api)
    assert only_api.count('class="badge badge-api"') == 3
    assert sorted(_items(only_chats)) == sorted(c.pk for c in chats)
    assert "badge-api" not in only_chats
    # An unknown filter shows everything.
    assert len(_items(alice_client.get(reverse("chat:list"), {"via": "x"}).content.decode())) == 5


def test_the_sidebars_next_page_keeps_the_filter(alice_client, user):
    from apps.chat.views import PAGE_SIZE

    Conversation.objects.bulk_create(
        [Conversation(owner=user, via_api=True, title=f"api {i}") for i in range(PAGE_SIZE + 5)]
        + [Conversation(owner=user, title=f"chat {i}") for i in range(3)]
    )

    first = alice_client.get(reverse("chat:list"), {"via": "api"}).content.decode()
    more = re.search(r'class="conv-more" hx-get="([^"]+)"', first).group(1).replace("&amp;", "&")
    second = alice_client.get(more).content.decode()

    assert "via=api" in more
    assert len(_items(first)) == PAGE_SIZE and len(_items(second)) == 5
    assert "chat " not in first + second
