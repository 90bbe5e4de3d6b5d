"""Edit and regenerate with branches: a conversation is a tree, the branch shown is what the
model answers, and editing a message takes back what memory learned only from its old text."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from apps.chat import branch_services, services
from apps.chat.models import Conversation, Message
from apps.chat.selectors import history_before, messages_of
from apps.cognition import episodes, reflection
from apps.cognition.branching import message_delete, message_edit
from apps.cognition.reflection_timing import replies_waiting
from apps.memory.models import MemoryNode, Predicate, Triple
from tests.chat.conftest import connect_socket, receive_until, send_action

pytestmark = pytest.mark.django_db


def _turn(conversation, text: str, answer: str) -> tuple[Message, Message]:
    sent = services.message_send(conversation=conversation, content=text)
    services.message_finish(
        message=sent.reply, status=Message.Status.COMPLETE, content=answer, background=False
    )
    return sent.question, Message.objects.get(pk=sent.reply.pk)


def _shown(conversation) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages_of(conversation=conversation)]


def _places(conversation) -> list[tuple[str, int, int]]:
    return [
        (m.content, m.branch_index, m.branch_count) for m in messages_of(conversation=conversation)
    ]


def test_each_message_follows_the_last_one_of_the_branch_shown(user):
    conversation = Conversation.objects.create(owner=user)
    q1, a1 = _turn(conversation, "one", "answer one")
    q2, a2 = _turn(conversation, "two", "answer two")
    q1.refresh_from_db()
    q2.refresh_from_db()
    assert (q1.parent_id, a1.parent_id, q2.parent_id, a2.parent_id) == (None, q1.pk, a1.pk, q2.pk)
    assert a2.reply_to_id == q2.pk


def test_an_edit_starts_a_branch_and_switching_back_shows_the_old_one_whole(user):
    conversation = Conversation.objects.create(owner=user)
    q1, _ = _turn(conversation, "I like tea", "Tea it is")
    _turn(conversation, "and biscuits?", "Biscuits too")

    sent = message_edit(user=user, message=q1, content="I like coffee")

    assert Message.objects.get(pk=sent.question.pk).parent_id is None  # q1's place, beside it
    assert _shown(conversation) == [("user", "I like coffee"), ("assistant", "")]
    assert _places(conversation) == [("I like coffee", 2, 2), ("", 1, 1)]
    # The answer of the edit answers the new branch: nothing of the old one.
    assert [m.content for m in history_before(message=sent.reply, limit=50)] == ["I like coffee"]
    services.message_finish(
        message=sent.reply, status=Message.Status.COMPLETE, content="Coffee", background=False
    )

    branch_services.branch_show(message=q1)
    assert _shown(conversation) == [
        ("user", "I like tea"),
        ("assistant", "Tea it is"),
        ("user", "and biscuits?"),
        ("assistant", "Biscuits too"),
    ]
    assert _places(conversation)[0] == ("I like tea", 1, 2)

    # And forward again: the new branch, with its answer.
    branch_services.branch_show(message=Message.objects.get(pk=sent.question.pk))
    assert _shown(conversation) == [("user", "I like coffee"), ("assistant", "Coffee")]
    # The next message follows the branch shown.
    q3 = services.message_send(conversation=conversation, content="black").question
    assert Message.objects.get(pk=q3.pk).parent_id == sent.reply.pk


def test_a_regenerated_answer_answers_the_branch_up_to_its_question(user):
    conversation = Conversation.objects.create(owner=user)
    _turn(conversation, "one", "answer one")
    q2, a2 = _turn(conversation, "two", "answer two")

    again = services.message_regenerate(message=a2)

    assert (again.parent_id, again.reply_to_id) == (q2.pk, q2.pk)
    assert [m.content for m in history_before(message=again, limit=50)] == [
        "one",
        "answer one",
        "two",
    ]
    assert _places(conversation)[-1] == ("", 2, 2)
    a2.refresh_from_db()
    assert not a2.active
    services.message_finish(
        message=again, status=Message.Status.COMPLETE, content="answer 2b", background=False
    )
    branch_services.branch_show(message=a2)
    assert _shown(conversation)[-1] == ("assistant", "answer two")
    assert _places(conversation)[-1] == ("answer two", 1, 2)


def test_an_edit_is_refused_while_an_answer_is_written_and_leaves_the_branch_as_it_was(user):
    conversation = Conversation.objects.create(owner=user)
    q1, _ = _turn(conversation, "one", "answer one")
    services.message_send(conversation=conversation, content="two")  # its answer is open

    with pytest.raises(services.ChatError, match="Wait for the current answer"):
        message_edit(user=user, message=q1, content="uno")
    with pytest.raises(services.ChatError, match="Wait for the current answer"):
        branch_services.branch_show(message=q1)

    assert [c for _, c in _shown(conversation)] == ["one", "answer one", "two", ""]


def test_an_edit_over_the_size_limit_is_refused(user):
    conversation = Conversation.objects.create(owner=user)
    q1, _ = _turn(conversation, "one", "answer one")
    with pytest.raises(services.ChatError, match="the limit is"):
        message_edit(user=user, message=q1, content="x" * 100_000)
    assert Message.objects.count() == 2 and _places(conversation)[0] == ("one", 1, 1)


def _remembered(user, reply: Message, text: str) -> MemoryNode:
    return MemoryNode.objects.create(owner=user, description=text, source_message=reply)


def test_an_edit_forgets_what_was_learned_only_from_the_old_text(user):
    conversation = Conversation.objects.create(owner=user)
    q1, a1 = _turn(conversation, "My cat is Tom and I live in Oslo", "Hello Tom")
    only_here = _remembered(user, a1, "The user's cat is called Tom")
    said_again = _remembered(user, a1, "The user lives in Oslo")
    likes = Predicate.objects.create(name="has_pet")
    fact = Triple.objects.create(
        owner=user, subject="user", predicate=likes, object="Tom", source_message=a1
    )
    # Another conversation's answer learned "Oslo" from its own message: it stays.
    elsewhere = Conversation.objects.create(owner=user)
    _, other = _turn(elsewhere, "Oslo is home", "Nice")
    services.message_trace_put(
        message_id=other.pk, key="reflection", value={"left": [said_again.pk], "triples": []}
    )

    sent = message_edit(user=user, message=q1, content="I live in Oslo")

    assert not MemoryNode.objects.filter(pk=only_here.pk).exists()
    assert not Triple.objects.filter(pk=fact.pk).exists()
    assert MemoryNode.objects.filter(pk=said_again.pk).exists()
    forgot = Message.objects.get(pk=sent.question.pk).trace["retracted"]["forgot"]
    assert forgot == ["The user's cat is called Tom", "user has_pet Tom"]
    # The new branch's answer says so, under its text.
    services.message_finish(
        message=sent.reply, status=Message.Status.COMPLETE, content="Oslo!", background=False
    )
    client = Client()
    client.force_login(user)
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    note = f'id="msg-{sent.reply.pk}-forgot">Forgot: The user&#x27;s cat is called Tom; user'
    assert note in page and page.count("msg-retracted") == 1


def test_an_edit_leaves_another_users_memories_alone(user, other_user):
    conversation = Conversation.objects.create(owner=user)
    q1, a1 = _turn(conversation, "My cat is Tom", "Hello Tom")
    theirs = MemoryNode.objects.create(owner=other_user, description="Tom", source_message=a1)
    sent = message_edit(user=user, message=q1, content="My dog is Rex")
    assert MemoryNode.objects.filter(pk=theirs.pk).exists()
    assert "retracted" not in Message.objects.get(pk=sent.question.pk).trace


@pytest.mark.parametrize(
    "name", ["chat:revise", "chat:regenerate", "chat:branch", "chat:delete_message"]
)
def test_another_user_cannot_change_the_branches_of_your_conversation(user, other_user, name):
    conversation = Conversation.objects.create(owner=user)
    q1, a1 = _turn(conversation, "one", "answer one")
    client = Client()
    client.force_login(other_user)
    for message in (q1, a1):
        response = client.post(
            reverse(name, args=[conversation.pk]), {"message_id": message.pk, "content": "mine"}
        )
        assert response.status_code == 404
    # Nor with a conversation of their own and a message of yours.
    own = Conversation.objects.create(owner=other_user)
    response = client.post(reverse(name, args=[own.pk]), {"message_id": q1.pk, "content": "x"})
    assert response.status_code == 404
    assert _shown(conversation) == [("user", "one"), ("assistant", "answer one")]
    assert Message.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_the_page_without_javascript_edits_regenerates_and_switches(user, llm_stub):
    conversation = Conversation.objects.create(owner=user)
    q1, _ = _turn(conversation, "one", "answer one")
    client = Client()
    client.force_login(user)
    url = reverse("chat:conversation", args=[conversation.pk])

    llm_stub.script({"content": "answer uno"})
    response = client.post(
        reverse("chat:revise", args=[conversation.pk]), {"message_id": q1.pk, "content": "uno"}
    )
    assert response.status_code == 302
    assert _shown(conversation) == [("user", "uno"), ("assistant", "answer uno")]
    page = client.get(url).content.decode()
    assert '<span class="branch-place">2 / 2</span>' in page
    assert page.count('class="msg-edit"') == 1 and page.count("regenerate-form") == 1

    reply = messages_of(conversation=conversation).last()
    llm_stub.script({"content": "answer uno again"})
    client.post(reverse("chat:regenerate", args=[conversation.pk]), {"message_id": reply.pk})
    assert _shown(conversation)[-1] == ("assistant", "answer uno again")
    assert '<span class="branch-place">2 / 2</span>' in client.get(url).content.decode()

    client.post(reverse("chat:branch", args=[conversation.pk]), {"message_id": q1.pk})
    assert _shown(conversation) == [("user", "one"), ("assistant", "answer one")]
    assert '<span class="branch-place">1 / 2</span>' in client.get(url).content.decode()


def _chat_requests(llm_stub) -> list[list[dict]]:
    return [r["body"]["messages"] for r in llm_stub.requests if r["path"] == "/v1/chat/completions"]


@pytest.mark.django_db(transaction=True)
async def test_over_the_socket_the_model_answers_the_branch_shown(user, llm_stub):
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    for text in ("I like tea", "and biscuits?"):
        llm_stub.script({"content": f"re: {text}"})
        await send_action(communicator, content=text)
        await receive_until(communicator, "msg-assistant complete")
    first = await Message.objects.aget(content="I like tea")

    llm_stub.script({"content": "re: coffee"})
    await send_action(communicator, action="revise", message_id=first.pk, content="I like coffee")
    frames = await receive_until(communicator, "msg-assistant complete")
    assert any('<span class="branch-place">2 / 2</span>' in frame for frame in frames)
    sent = [m for m in _chat_requests(llm_stub)[-1] if m["role"] != "system"]
    assert sent == [{"role": "user", "content": "I like coffee"}]

    answer = await Message.objects.aget(content="re: coffee")
    llm_stub.script({"content": "re: coffee, again"})
    await send_action(communicator, action="regenerate", message_id=answer.pk)
    await receive_until(communicator, "msg-assistant complete")
    sent = [m for m in _chat_requests(llm_stub)[-1] if m["role"] != "system"]
    assert sent == [{"role": "user", "content": "I like coffee"}]

    await send_action(communicator, action="branch", message_id=first.pk)
    frames = await receive_until(communicator, '<span class="branch-place">1 / 2</span>')
    assert "re: and biscuits?" in frames[-1]
    llm_stub.script({"content": "re: more"})
    await send_action(communicator, content="more?")
    await receive_until(communicator, "msg-assistant complete")
    sent = [m["content"] for m in _chat_requests(llm_stub)[-1] if m["role"] != "system"]
    assert sent == ["I like tea", "re: I like tea", "and biscuits?", "re: and biscuits?", "more?"]
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_another_users_socket_cannot_edit_your_message(user, other_user, llm_stub):
    mine = await Conversation.objects.acreate(owner=user)
    theirs = await Conversation.objects.acreate(owner=other_user)
    question = await Message.objects.acreate(conversation=mine, role="user", content="one")
    communicator = await connect_socket(other_user, theirs.pk)
    await send_action(communicator, action="revise", message_id=question.pk, content="x")
    await send_action(communicator, action="branch", message_id=question.pk)
    assert await communicator.receive_nothing(timeout=0.5)
    assert await Message.objects.acount() == 1
    await communicator.disconnect()


def test_reflection_and_episodes_read_only_the_branch_shown(user):
    conversation = Conversation.objects.create(owner=user)
    q1, old = _turn(conversation, "I like tea", "Tea it is")
    sent = message_edit(user=user, message=q1, content="I like coffee")
    services.message_finish(
        message=sent.reply, status=Message.Status.COMPLETE, content="Coffee", background=False
    )
    # The old answer was never reflected on: the edit took it off the branch first.
    assert replies_waiting(conversation_id=conversation.pk, limit=10) == [sent.reply.pk]
    assert reflection.unreflected_replies(conversation_id=conversation.pk, limit=10) == [
        sent.reply.pk
    ]
    assert reflection.reflectable_reply(old.pk) is None
    assert reflection.reflectable_reply(sent.reply.pk) is not None
    stretch = episodes._stretch(conversation.pk, 0)
    assert [m.content for m in stretch] == ["I like coffee", "Coffee"]


def test_deleting_a_message_deletes_what_follows_and_forgets_what_only_it_said(user):
    conversation = Conversation.objects.create(owner=user)
    _turn(conversation, "hello", "hi")
    q2, a2 = _turn(conversation, "My cat is Tom", "Hello Tom")
    _turn(conversation, "and my dog?", "Tell me")
    cat = _remembered(user, a2, "The user's cat is called Tom")

    forgot = message_delete(message=q2)

    assert forgot == ["The user's cat is called Tom"]
    assert not MemoryNode.objects.filter(pk=cat.pk).exists()
    assert _shown(conversation) == [("user", "hello"), ("assistant", "hi")]
    assert Message.objects.count() == 2
    with pytest.raises(services.ChatError):
        message_delete(message=Message.objects.get(content="hi"))


def test_deleting_an_edited_message_shows_its_other_version(user):
    conversation = Conversation.objects.create(owner=user)
    q1, _ = _turn(conversation, "one", "answer one")
    sent = message_edit(user=user, message=q1, content="uno")
    services.message_finish(
        message=sent.reply, status=Message.Status.COMPLETE, content="answer uno", background=False
    )
    message_delete(message=Message.objects.get(pk=sent.question.pk))
    assert _places(conversation) == [("one", 1, 1), ("answer one", 1, 1)]


@pytest.mark.django_db(transaction=True)
async def test_a_deletion_over_the_socket_says_what_memory_forgot(user, llm_stub):
    conversation = await Conversation.objects.acreate(owner=user)
    communicator = await connect_socket(user, conversation.pk)
    llm_stub.script({"content": "Hello Tom"})
    await send_action(communicator, content="My cat is Tom")
    await receive_until(communicator, "msg-assistant complete")
    question = await Message.objects.aget(role="user")
    answer = await Message.objects.aget(role="assistant")
    await MemoryNode.objects.acreate(owner=user, description="Cat: Tom", source_message=answer)
    await send_action(communicator, action="delete", message_id=question.pk)
    frames = await receive_until(communicator, "Forgot: Cat: Tom.")
    assert any('id="messages"' in frame and "My cat is Tom" not in frame for frame in frames)
    assert await Message.objects.acount() == 0 and await MemoryNode.objects.acount() == 0
    await communicator.disconnect()
