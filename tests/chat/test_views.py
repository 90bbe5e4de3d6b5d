from __future__ import annotations

import time

import pytest

from apps.chat import services
from apps.chat.models import Conversation, Message

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def mallorys_conversation(other_user):
    conversation = Conversation.objects.create(owner=other_user, title="mallory's secrets")
    Message.objects.create(conversation=conversation, role="user", content="hidden words")
    return conversation


def test_the_sidebar_lists_only_my_conversations_newest_first(alice_client, user, other_user):
    older = Conversation.objects.create(owner=user, title="older")
    newer = Conversation.objects.create(owner=user, title="newer")
    Conversation.objects.create(owner=other_user, title="not mine")
    Conversation.objects.filter(pk=older.pk).update(updated_at="2020-01-01T00:00Z")
    body = alice_client.get("/").content.decode()
    assert body.index(f'id="conv-{newer.pk}"') < body.index(f'id="conv-{older.pk}"')
    assert "not mine" not in body


def test_the_conversation_list_is_paged_with_bounded_queries(
    alice_client, user, django_assert_max_num_queries
):
    Conversation.objects.bulk_create([Conversation(owner=user, title=f"c{i}") for i in range(75)])
    with django_assert_max_num_queries(6):
        first = alice_client.get("/c/").content.decode()
    assert first.count('class="conv-item"') == 30 and "page=2" in first
    third = alice_client.get("/c/?page=3").content.decode()
    assert third.count('class="conv-item"') == 15 and "page=4" not in third


def test_search_finds_titles_and_message_content_but_not_other_users(
    alice_client, user, mallorys_conversation
):
    by_title = Conversation.objects.create(owner=user, title="Holiday plans")
    by_content = Conversation.objects.create(owner=user, title="Misc")
    Message.objects.create(conversation=by_content, role="user", content="my holiday in Rome")
    Conversation.objects.create(owner=user, title="Unrelated")
    body = alice_client.get("/c/", {"q": "holiday"}).content.decode()
    assert f"conv-{by_title.pk}" in body and f"conv-{by_content.pk}" in body
    assert "Unrelated" not in body
    assert "mallory" not in alice_client.get("/c/", {"q": "hidden"}).content.decode()


def test_rename_and_delete(alice_client, user):
    conversation = Conversation.objects.create(owner=user)
    response = alice_client.post(
        f"/c/{conversation.pk}/rename", {"title": "  Trip  "}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and "Trip" in response.content.decode()
    conversation.refresh_from_db()
    assert conversation.title == "Trip"
    confirm = alice_client.get(f"/c/{conversation.pk}/delete")
    assert "cannot be undone" in confirm.content.decode()
    assert alice_client.post(f"/c/{conversation.pk}/delete").status_code == 302
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/c/{pk}/"),
        ("post", "/c/{pk}/rename"),
        ("get", "/c/{pk}/delete"),
        ("post", "/c/{pk}/delete"),
        ("post", "/c/{pk}/send"),
        ("post", "/c/{pk}/retry"),
        ("post", "/c/{pk}/continue"),
    ],
)
def test_another_users_conversation_is_404_on_every_path(
    alice_client, mallorys_conversation, llm_stub, method, path
):
    url = path.format(pk=mallorys_conversation.pk)
    response = getattr(alice_client, method)(url, {"title": "x", "content": "x"})
    assert response.status_code == 404
    mallorys_conversation.refresh_from_db()
    assert mallorys_conversation.title == "mallory's secrets"
    assert mallorys_conversation.messages.count() == 1


def test_new_reuses_an_empty_conversation(alice_client, user):
    first = alice_client.post("/c/new")
    second = alice_client.post("/c/new")
    assert first["Location"] == second["Location"]
    assert Conversation.objects.filter(owner=user).count() == 1


@pytest.mark.django_db(transaction=True)
def test_sending_without_javascript_saves_and_answers(alice_client, user, llm_stub):
    llm_stub.script({"content": "plain answer"})
    conversation = Conversation.objects.create(owner=user)
    response = alice_client.post(f"/c/{conversation.pk}/send", {"content": "hello"})
    assert response.status_code == 302
    page = alice_client.get(response["Location"]).content.decode()
    assert "hello" in page and "plain answer" in page


def test_without_javascript_search_and_more_are_whole_pages(alice_client, user):
    Conversation.objects.bulk_create(
        [Conversation(owner=user, title=f"plain {i}") for i in range(35)]
    )
    holiday = Conversation.objects.create(owner=user, title="Holiday plans")

    found = alice_client.get("/", {"q": "holiday"}).content.decode()
    assert found.count('class="conv-item"') == 1 and f"conv-{holiday.pk}" in found
    assert 'value="holiday"' in found and 'role="search"' in found

    first = alice_client.get(f"/c/{holiday.pk}/").content.decode()
    assert 'href="?page=2"' in first
    second = alice_client.get(f"/c/{holiday.pk}/", {"page": 2}).content.decode()
    assert "<html" in second and 'id="composer"' in second, "a whole page, not a fragment"
    assert second.count('class="conv-item"') == 6


@pytest.mark.django_db(transaction=True)
def test_retrying_without_javascript_answers_again(alice_client, user, other_user, llm_stub):
    llm_stub.script({"fault": "http_500"}, {"content": "Second try."})
    conversation = Conversation.objects.create(owner=user)
    alice_client.post(f"/c/{conversation.pk}/send", {"content": "hello"})
    reply = Message.objects.get(role="assistant")
    assert reply.status == "failed"
    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    assert f'method="post" action="/c/{conversation.pk}/retry"' in page

    theirs = Conversation.objects.create(owner=other_user)
    theirs_reply = Message.objects.create(
        conversation=theirs, role="assistant", status="failed", error="x"
    )
    not_here = {"message_id": theirs_reply.pk}
    assert alice_client.post(f"/c/{conversation.pk}/retry", not_here).status_code == 404
    theirs_reply.refresh_from_db()
    assert theirs_reply.status == "failed"

    response = alice_client.post(f"/c/{conversation.pk}/retry", {"message_id": reply.pk})
    assert response.status_code == 302
    reply.refresh_from_db()
    assert (reply.status, reply.content) == ("complete", "Second try.")
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1


@pytest.mark.django_db(transaction=True)
def test_continuing_without_javascript_writes_on_in_the_same_answer(
    alice_client, user, other_user, llm_stub
):
    llm_stub.script(
        {"content": "Part one", "finish_reason": "length"}, {"content": "and part two."}
    )
    conversation = Conversation.objects.create(owner=user)
    alice_client.post(f"/c/{conversation.pk}/send", {"content": "hello"})
    reply = Message.objects.get(role="assistant")
    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    assert "Stopped at 2 tokens." in page
    assert f'method="post" action="/c/{conversation.pk}/continue"' in page

    theirs = Conversation.objects.create(owner=other_user)
    theirs_reply = Message.objects.create(
        conversation=theirs, role="assistant", content="x y", finish_reason="length"
    )
    not_here = {"message_id": theirs_reply.pk}
    assert alice_client.post(f"/c/{conversation.pk}/continue", not_here).status_code == 404
    theirs_reply.refresh_from_db()
    assert (theirs_reply.content, theirs_reply.finish_reason) == ("x y", "length")

    response = alice_client.post(f"/c/{conversation.pk}/continue", {"message_id": reply.pk})
    assert response.status_code == 302
    reply.refresh_from_db()
    assert (reply.status, reply.content) == ("complete", "Part one and part two.")
    assert Message.objects.filter(conversation=conversation).count() == 2

    # A whole answer is not continued: the refusal is shown on the page.
    response = alice_client.post(
        f"/c/{conversation.pk}/continue", {"message_id": reply.pk}, follow=True
    )
    assert "Only an answer that was cut short can be continued." in response.content.decode()


def test_a_busy_conversation_refuses_a_second_message(user):
    conversation = Conversation.objects.create(owner=user)
    services.message_send(conversation=conversation, content="one")
    with pytest.raises(services.ChatError, match="Wait for the current answer"):
        services.message_send(conversation=conversation, content="two")
    assert conversation.messages.filter(role="user").count() == 1


def _complete_exchange(conversation, question="How do I bake bread?"):
    reply = services.message_send(conversation=conversation, content=question).reply
    return services.message_finish(message=reply, status="complete", content="Flour and water.")


def test_a_worker_titles_a_conversation_from_its_first_exchange(
    celery_worker, user, llm_stub, config, django_capture_on_commit_callbacks
):
    config(reflection_quiet_seconds=0)  # the title waits for a quiet conversation
    llm_stub.script({"content": "Baking Bread at Home", "match": "short title"})
    conversation = Conversation.objects.create(owner=user)
    with django_capture_on_commit_callbacks(execute=True):
        _complete_exchange(conversation)
    deadline = time.monotonic() + 45
    while not Conversation.objects.get(pk=conversation.pk).title:
        assert time.monotonic() < deadline, "the title task never ran"
        time.sleep(0.1)
    assert Conversation.objects.get(pk=conversation.pk).title == "Baking Bread at Home"


def test_the_title_falls_back_to_a_truncation_when_the_llm_fails(
    celery_worker, user, llm_stub, config, django_capture_on_commit_callbacks
):
    config(reflection_quiet_seconds=0)  # the title waits for a quiet conversation
    llm_stub.set_defaults(fault="http_500")
    conversation = Conversation.objects.create(owner=user)
    with django_capture_on_commit_callbacks(execute=True):
        _complete_exchange(conversation, "Sourdough starter questions")
    deadline = time.monotonic() + 45
    while not Conversation.objects.get(pk=conversation.pk).title:
        assert time.monotonic() < deadline, "the title task never ran"
        time.sleep(0.1)
    assert Conversation.objects.get(pk=conversation.pk).title == "Sourdough starter questions"


def test_a_title_of_chat_template_tokens_falls_back_to_the_first_words(
    celery_worker, user, llm_stub, config, django_capture_on_commit_callbacks
):
    config(reflection_quiet_seconds=0)  # the title waits for a quiet conversation
    llm_stub.script({"content": "<|im_end|>user", "match": "short title"})
    conversation = Conversation.objects.create(owner=user)
    with django_capture_on_commit_callbacks(execute=True):
        _complete_exchange(conversation, "Sourdough starter questions")
    deadline = time.monotonic() + 45
    while not Conversation.objects.get(pk=conversation.pk).title:
        assert time.monotonic() < deadline, "the title task never ran"
        time.sleep(0.1)
    assert Conversation.objects.get(pk=conversation.pk).title == "Sourdough starter questions"
    assert any("short title" in str(r["body"]) for r in llm_stub.requests), "the LLM was asked"
