"""Which pages a streaming answer's fragments reach, and by which way: the asking page straight
from its socket, the other pages of the conversation through the channel layer."""

from __future__ import annotations

import pytest
from channels.layers import get_channel_layer

from apps.chat.models import Conversation
from tests.chat.conftest import connect_socket, receive_until, send_action

pytestmark = pytest.mark.django_db(transaction=True)

FRAGMENT = '<textarea hidden class="md-src"'


def _published(monkeypatch) -> list[str]:
    """Every fragment published to a group, as it goes out."""
    layer = get_channel_layer()
    publish = layer.group_send
    published: list[str] = []

    async def group_send(group, message):
        published.append(message.get("html", ""))
        await publish(group, message)

    monkeypatch.setattr(layer, "group_send", group_send)
    return published


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user)


async def test_a_page_alone_gets_the_streamed_text_from_its_socket_and_none_is_published(
    user, conversation, llm_stub, monkeypatch
):
    # The first token comes well after the answer has looked for other pages.
    llm_stub.script({"content": "one two three four five six seven eight", "ttft": 0.5, "tps": 40})
    published = _published(monkeypatch)
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="count for me")
    frames = await receive_until(communicator, "msg-assistant complete")
    assert any(f.startswith(FRAGMENT) and "one two" in f for f in frames), "no streamed text"
    assert not [html for html in published if html.startswith(FRAGMENT)]
    # The end always goes to the group: a page opened meanwhile must not wait forever.
    assert any("msg-assistant complete" in html for html in published)
    await communicator.disconnect()


async def test_a_second_page_of_the_conversation_gets_the_streamed_text_and_the_end(
    user, conversation, llm_stub
):
    llm_stub.script({"content": "tick " * 20, "ttft": 0.5, "tps": 40})
    asking = await connect_socket(user, conversation.pk)
    watching = await connect_socket(user, conversation.pk)
    await send_action(asking, content="go on")
    frames = await receive_until(watching, "msg-assistant complete")
    assert any(f.startswith(FRAGMENT) and "tick tick" in f for f in frames), "no streamed text"
    await receive_until(asking, "msg-assistant complete")
    await watching.disconnect()
    await asking.disconnect()


async def test_a_reasoning_models_thinking_shows_folded_while_it_streams(
    user, conversation, llm_stub
):
    llm_stub.script(
        {"reasoning": "She asks for a count, so I count.", "content": "one two three", "tps": 40}
    )
    communicator = await connect_socket(user, conversation.pk)
    await send_action(communicator, content="count for me")
    frames = await receive_until(communicator, "msg-assistant complete")
    thinking = [
        f for f in frames if f.startswith(('<details class="reasoning"', '<div class="reas'))
    ]
    assert "<summary>Thinking…</summary>" in thinking[0]
    assert "She asks for a count, so I count." in thinking[-1]
    # The reply's text never carries the thinking; the saved reply shows it folded as "Thought".
    assert not [f for f in frames if f.startswith(FRAGMENT) and "She asks" in f]
    assert any("<summary>Thought</summary>" in f for f in frames)
    await communicator.disconnect()
