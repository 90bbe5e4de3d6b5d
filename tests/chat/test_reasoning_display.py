"""A reasoning model's thinking is shown folded above its answer, and only when there was some."""

from __future__ import annotations

import pytest

from apps.chat.models import Conversation, Message

pytestmark = pytest.mark.django_db


def _page_with_reply(client, user, **trace) -> str:
    conversation = Conversation.objects.create(owner=user)
    Message.objects.create(conversation=conversation, role="user", content="Where is Rome?")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="Rome is in Italy.",
        status=Message.Status.COMPLETE,
        trace=trace,
    )
    client.force_login(user)
    return client.get(f"/c/{conversation.pk}/").content.decode()


def test_the_thinking_is_folded_above_the_answer_and_escaped(client, user):
    page = _page_with_reply(client, user, reasoning="Rome <b>is</b> the capital.\nSo: Italy.")

    assert '<details class="reasoning">' in page and "<summary>Thought</summary>" in page
    assert "Rome &lt;b&gt;is&lt;/b&gt; the capital.\nSo: Italy." in page
    assert page.index('<details class="reasoning">') < page.index("Rome is in Italy.")
    # Folded by default.
    assert '<details class="reasoning" open' not in page


def test_a_reply_without_thinking_shows_no_thought(client, user):
    page = _page_with_reply(client, user, reasoning="")

    assert "Rome is in Italy." in page
    assert 'class="reasoning"' not in page and "<summary>Thought</summary>" not in page
