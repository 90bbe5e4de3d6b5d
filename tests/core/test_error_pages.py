from __future__ import annotations

import pytest
from django.test import Client

from apps.chat.models import Conversation

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.core.error_urls")]


@pytest.fixture
def alice_client(client, user):
    client.force_login(user)
    return client


def _in_the_layout(body: str) -> bool:
    return (
        "css/thalamus.css" in body
        and 'class="error-page"' in body
        and 'href="/"' in body
        and "{#" not in body
    )


def test_a_conversation_that_does_not_exist_is_a_404_in_the_apps_layout(alice_client):
    missing = (Conversation.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
    response = alice_client.get(f"/c/{missing}/")
    body = response.content.decode()
    assert response.status_code == 404
    assert _in_the_layout(body)
    assert "Not found" in body and 'class="topbar"' in body


def test_another_users_conversation_is_the_same_404(alice_client, other_user):
    theirs = Conversation.objects.create(owner=other_user, title="not yours")
    response = alice_client.get(f"/c/{theirs.pk}/")
    assert response.status_code == 404
    assert _in_the_layout(response.content.decode())
    assert "not yours" not in response.content.decode()


def test_a_refused_page_is_a_403_in_the_apps_layout(alice_client):
    response = alice_client.get("/test-forbidden")
    body = response.content.decode()
    assert response.status_code == 403
    assert _in_the_layout(body) and "Not allowed" in body


def test_a_failing_view_is_a_500_in_the_apps_layout_without_the_request(user, settings):
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    client.force_login(user)
    response = client.get("/test-broken")
    body = response.content.decode()
    assert response.status_code == 500
    assert _in_the_layout(body) and "Something went wrong" in body
    # Rendered without context processors or the user: nothing on it can fail in turn.
    assert 'class="topbar"' not in body
