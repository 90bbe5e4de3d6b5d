from __future__ import annotations

import pytest
from django.utils import timezone

from apps.chat.models import Message
from apps.cognition import tasks
from apps.cognition.reflection import (
    reflect_on_message,
    reflect_on_replies,
    unreflected_replies,
)
from apps.cognition.schemas import stated_quotes_max_tokens
from apps.core.models import Event
from apps.memory.models import MemoryNode, RetrievalPlan, Triple
from tests.cognition.conftest import EXTRACT, reflection, wait_for

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = pytest.mark.usefixtures("no_outbound_in_atomic")


def _asked(llm_stub) -> list[dict]:
    return [r["body"] for r in llm_stub.requests if EXTRACT in str(r["body"])]


def test_a_completed_reply_forms_typed_memories_and_triples_in_the_worker(
    celery_worker, user, turn, llm_stub, config
):
    # Reflection waits for the conversation to go quiet (test_reflection_timing): here at once.
    config(critic_enabled=False, reflection_quiet_seconds=0)
    from apps.chat import services as chat_services

    reply = turn("I moved to Rome last week, I love espresso", "")
    llm_stub.script(reflection("I moved to Rome last week", "I love espresso"))

    chat_services.message_finish(message=reply, status="complete", content="Welcome to Rome!")

    nodes = wait_for(lambda: list(MemoryNode.objects.filter(owner=user).order_by("pk")))
    assert [n.description for n in nodes] == [
        "The user moved to Rome last week",
        "The user loves espresso",
    ]
    assert {n.source_message_id for n in nodes} == {reply.pk}
    assert {n.source for n in nodes} == {MemoryNode.Source.USER}
    assert (nodes[0].fact_key, nodes[0].topic, nodes[0].state) == ("home_city", "home", "volatile")
    assert (nodes[1].kind, nodes[1].quote) == ("preference", "I love espresso")
    stored = {(t.subject, t.predicate.name, t.object) for t in Triple.objects.filter(owner=user)}
    assert stored == {("user", "lives_in", "Rome"), ("user", "likes", "espresso")}
    # No retrieval plan is asked for any longer: the conversation's stays as it was.
    assert not RetrievalPlan.objects.exists()
    perception = wait_for(lambda: Event.objects.filter(owner=user, kind="perception").first())
    assert perception.payload["created"] == [n.pk for n in nodes]
    reply.refresh_from_db()
    assert reply.trace["reflection"]["stated"] is True
    assert reply.trace["reflection"]["taught"] is True


def test_the_extraction_is_one_small_bounded_call_that_never_shows_the_assistants_words(
    user, turn, llm_stub, config, transactional_db
):
    config(critic_enabled=False)
    reply = turn("I play the cello", "The assistant thinks you love opera.")
    llm_stub.script(reflection("I play the cello"))

    reflect_on_message(message_id=reply.pk)

    (body,) = _asked(llm_stub)
    assert "I play the cello" in str(body["messages"])
    assert "opera" not in str(body["messages"])
    schema = body["response_format"]["json_schema"]["schema"]
    quotes = schema["properties"]["message_1"]
    # No quote longer than the message, and room for the longest reply that allows, no more.
    assert quotes["maxItems"] == 2 and quotes["items"]["maxLength"] == len("I play the cello")
    assert body["max_tokens"] == stated_quotes_max_tokens(1, len("I play the cello")) < 64


def test_reflection_run_twice_writes_once(celery_worker, user, turn, llm_stub, config):
    config(critic_enabled=False)
    reply = turn("My sister is called Anna", "Noted.")
    llm_stub.script(reflection("My sister is called Anna"), reflection("My sister is called Anna"))

    first = tasks.reflect.delay(reply.pk)
    second = tasks.reflect.delay(reply.pk)
    first.get(timeout=45)
    second.get(timeout=45)

    node = MemoryNode.objects.get(owner=user)
    assert (node.description, node.fact_key) == ("The user's sister is called Anna", "sister_name")
    assert Event.objects.filter(owner=user, kind="perception").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_fact_update_evolves_the_fact_instead_of_duplicating_it(user, turn, llm_stub, config):
    config(critic_enabled=False)
    first = turn("I live in Milan", "Nice.")
    llm_stub.script(reflection("I live in Milan"))
    reflect_on_message(message_id=first.pk)
    milan = MemoryNode.objects.get(owner=user)

    second = turn("I moved to Turin.", "Good luck with the move.")
    # A small model says the same thing several times.
    llm_stub.script(reflection("I moved to Turin", "moved to Turin"))
    outcome = reflect_on_message(message_id=second.pk)

    current = MemoryNode.objects.get(owner=user, valid_to=None)
    assert current.pk == milan.pk and current.description == "The user moved to Turin"
    assert list(
        MemoryNode.objects.filter(owner=user, valid_to__isnull=False).values_list(
            "description", flat=True
        )
    ) == ["The user lives in Milan"]
    assert outcome["updated"] == [milan.pk] and outcome["created"] == []
    lives_in = Triple.objects.filter(owner=user, valid_to=None, predicate__name="lives_in")
    assert "Turin" in {triple.object for triple in lives_in}


@pytest.mark.django_db(transaction=True)
def test_a_restated_memory_is_left_and_counts_as_taught(user, turn, llm_stub, config):
    config(critic_enabled=False)
    first = turn("I love espresso", "Me too.")
    llm_stub.script(reflection("I love espresso"))
    reflect_on_message(message_id=first.pk)
    espresso = MemoryNode.objects.get(owner=user)

    again = turn("I love espresso!", "Noted.")
    llm_stub.script(reflection("I love espresso"))
    outcome = reflect_on_message(message_id=again.pk)

    assert outcome["left"] == [espresso.pk] and outcome["created"] == []
    assert outcome["stated"] is True and outcome["taught"] is True
    assert MemoryNode.objects.filter(owner=user).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_quote_the_user_never_wrote_is_rejected_and_a_short_one_points_at_its_sentence(
    user, turn, llm_stub, config
):
    config(critic_enabled=False)
    reply = turn("My name is Laura Bianchi and I live in Turin", "Ciao Laura! Turin is lovely.")
    llm_stub.script(reflection("Laura Bianchi", "Laura Bianchi is a renowned Italian chef"))

    outcome = reflect_on_message(message_id=reply.pk)

    assert sorted(MemoryNode.objects.values_list("description", flat=True)) == [
        "The user lives in Turin",
        "The user's name is Laura Bianchi",
    ]
    assert outcome["rejected"] == [
        {"text": "Laura Bianchi is a renowned Italian chef", "reason": "not in the user's messages"}
    ]


@pytest.mark.django_db(transaction=True)
def test_what_a_rule_places_is_learnt_though_the_model_quoted_only_part_of_it(
    user, turn, llm_stub, config
):
    """SmolLM2-135M quotes some of a message's statements and leaves others out."""
    config(critic_enabled=False)
    reply = turn(
        "My name is Laura Bianchi. I work as a carpenter. I prefer short answers, please. "
        "I like it. I have a collection of old stamps.",
        "Noted.",
    )
    llm_stub.script(reflection("My name is Laura Bianchi"))

    outcome = reflect_on_message(message_id=reply.pk)

    learnt = MemoryNode.objects.filter(pk__in=outcome["created"])
    assert sorted(learnt.values_list("description", "fact_key", "source")) == [
        ("The user prefers short answers", "", "user"),
        ("The user works as a carpenter", "occupation", "user"),
        ("The user's name is Laura Bianchi", "name", "user"),
    ]
    # No rule places the stamps: without a quote they are not learnt; "it" says nothing.
    assert MemoryNode.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_server_that_ignores_the_schemas_limits_still_has_its_quotes_read(
    user, turn, llm_stub, config
):
    """Without a grammar a model may quote past the longest message, and quote three times:
    the quote is cut to the limit and the list to two, not the whole reply thrown away."""
    config(critic_enabled=False)
    reply = turn("I have a collection of old stamps", "Nice!")
    llm_stub.script(
        reflection("I have a collection of old stamps, the user told the assistant", "Nice!", "x")
    )

    outcome = reflect_on_message(message_id=reply.pk)

    learnt = MemoryNode.objects.filter(pk__in=outcome["created"])
    assert list(learnt.values_list("description", flat=True)) == [
        "The user has a collection of old stamps"
    ]
    assert outcome["rejected"] == [{"text": "Nice!", "reason": "not in the user's messages"}]


@pytest.mark.django_db(transaction=True)
def test_a_question_states_nothing_and_is_not_counted_as_a_turn_to_learn_from(
    user, turn, llm_stub, config
):
    config(critic_enabled=False)
    reply = turn("What should I cook for dinner tonight?", "Pasta.")
    llm_stub.script(reflection("What should I cook for dinner tonight?"))

    outcome = reflect_on_message(message_id=reply.pk)

    assert not MemoryNode.objects.exists()
    assert outcome["stated"] is False and outcome["taught"] is False


@pytest.mark.django_db(transaction=True)
def test_several_replies_are_reflected_on_in_one_call_each_with_its_own_outcome(
    user, turn, llm_stub, config
):
    config(critic_enabled=False)
    name = turn("My name is Laura Bianchi", "Hello Laura.")
    work = turn("I work as a carpenter in a small workshop", "A fine craft.")
    question = turn("Which wood is best for a table?", "Oak.")
    claimed = turn("I prefer short answers", "Sure.")
    Message.objects.filter(pk=claimed.pk).update(trace={"reflection": {"at": "earlier"}})
    # The model puts the second message's quote under the first key: its words decide.
    llm_stub.script(
        reflection(
            "I work as a carpenter",
            message_2=["My name is Laura Bianchi"],
            message_3=["I prefer short answers"],
        )
    )

    outcomes = reflect_on_replies(reply_ids=[claimed.pk, question.pk, work.pk, name.pk])

    assert set(outcomes) == {name.pk, work.pk, question.pk}
    assert len(_asked(llm_stub)) == 1
    (said,) = [m["content"] for m in _asked(llm_stub)[0]["messages"]]
    assert "I prefer short answers" not in said
    learnt = {
        reply_id: list(
            MemoryNode.objects.filter(pk__in=outcome["created"]).values_list("fact_key", flat=True)
        )
        for reply_id, outcome in outcomes.items()
    }
    assert learnt == {name.pk: ["name"], work.pk: ["occupation"], question.pk: []}
    assert outcomes[question.pk]["rejected"] == [
        {"text": "I prefer short answers", "reason": "not in the user's messages"}
    ]
    assert [outcomes[pk]["stated"] for pk in (name.pk, work.pk, question.pk)] == [
        True,
        True,
        False,
    ]
    for reply in (name, work, question):
        reply.refresh_from_db()
        assert reply.trace["reflection"]["created"] == outcomes[reply.pk]["created"]
    assert reflect_on_replies(reply_ids=[name.pk, work.pk]) is None


@pytest.mark.django_db(transaction=True)
def test_unreflected_replies_are_the_complete_ones_without_a_reflection_oldest_first(
    user, turn, config
):
    first = turn("one", "1")
    done = turn("two", "2")
    Message.objects.filter(pk=done.pk).update(trace={"reflection": {"at": "earlier"}})
    streaming = turn("three", "3")
    Message.objects.filter(pk=streaming.pk).update(status=Message.Status.STREAMING)
    last = turn("four", "4")

    conversation_id = first.conversation_id
    assert unreflected_replies(conversation_id=conversation_id, limit=5) == [first.pk, last.pk]
    assert unreflected_replies(conversation_id=conversation_id, limit=1) == [first.pk]


def _garbage_on_every_attempt() -> list[dict]:
    """Garbage for the extraction and for its repair, on every attempt the task makes."""
    return [
        {"fault": "garbage", "match": EXTRACT},
        {"fault": "garbage", "match": "does not match the required JSON schema"},
    ] * tasks.INVALID_REPLY_ATTEMPTS


def test_garbage_json_is_repaired_once_per_attempt_then_the_turn_is_marked_failed(
    celery_worker, user, turn, llm_stub, config, monkeypatch
):
    config(critic_enabled=False)
    monkeypatch.setattr(tasks, "INVALID_REPLY_BACKOFF", 0)
    # A statement no rule places: without the model's quote nothing can be learnt from it.
    reply = turn("I have a collection of old stamps", "Nice!")
    llm_stub.script(*_garbage_on_every_attempt())

    tasks.reflect.delay(reply.pk).get(timeout=45)

    error = Event.objects.get(owner=user, kind="error")
    assert error.payload["step"] == "reflection" and error.payload["message_id"] == reply.pk
    reply.refresh_from_db()
    assert reply.trace["reflection"]["failed"] is True
    assert reply.trace["reflection"]["attempts"] == tasks.INVALID_REPLY_ATTEMPTS
    # The rules saw a statement: the failure counts against the write rate.
    assert reply.trace["reflection"]["stated"] is True
    assert not MemoryNode.objects.exists() and not Triple.objects.exists()
    chats = [r for r in llm_stub.requests if r["path"].endswith("/chat/completions")]
    assert len(chats) == 2 * tasks.INVALID_REPLY_ATTEMPTS


def test_a_model_that_never_answers_usably_still_leaves_what_the_rules_place(
    celery_worker, user, turn, llm_stub, config, monkeypatch
):
    config(critic_enabled=False)
    monkeypatch.setattr(tasks, "INVALID_REPLY_BACKOFF", 0)
    reply = turn("I have a cat named Miso", "Cute!")
    llm_stub.script(*_garbage_on_every_attempt())

    tasks.reflect.delay(reply.pk).get(timeout=45)

    node = MemoryNode.objects.get(owner=user)
    assert (node.description, node.source, node.quote) == (
        "The user has a cat named Miso",
        "user",
        "I have a cat named Miso",
    )
    assert Triple.objects.get(owner=user).predicate.name == "has_pet"
    reply.refresh_from_db()
    outcome = reply.trace["reflection"]
    assert outcome["created"] == [node.pk] and outcome["taught"] is True
    assert outcome["attempts"] == tasks.INVALID_REPLY_ATTEMPTS and "failed" not in outcome
    # The model's failure is still told.
    error = Event.objects.get(owner=user, kind="error")
    assert error.payload["message_id"] == reply.pk and outcome["error"] in error.payload["error"]


def test_a_repaired_reply_is_used(celery_worker, user, turn, llm_stub, config):
    config(critic_enabled=False)
    reply = turn("I am vegetarian", "Got it.")
    llm_stub.script(
        {"content": '{"message_1": "nope"}', "match": EXTRACT},
        {
            "json": reflection("I am vegetarian")["json"],
            "match": "does not match the required JSON schema",
        },
    )

    tasks.reflect.delay(reply.pk).get(timeout=45)

    node = MemoryNode.objects.get(owner=user)
    assert (node.description, node.topic) == ("The user is vegetarian", "health")


def test_an_llm_500_is_retried_then_recorded(
    celery_worker, user, turn, llm_stub, config, monkeypatch
):
    config(critic_enabled=False)
    monkeypatch.setattr(tasks.reflect, "max_retries", 2)
    reply = turn("I play the cello", "Lovely.")
    rules = turn("My sister is called Anna", "Nice.")
    llm_stub.script(*[{"fault": "http_500", "match": EXTRACT}] * 6)

    tasks.reflect.delay(reply.pk)
    tasks.reflect.delay(rules.pk)
    wait_for(lambda: Event.objects.filter(owner=user, kind="error").count() == 2, timeout=30)

    assert len(_asked(llm_stub)) == 6
    summaries = Event.objects.filter(owner=user, kind="error").values_list("summary", flat=True)
    assert all("gave up after 3 attempts" in summary for summary in summaries)
    reply.refresh_from_db()
    assert reply.trace["reflection"]["failed"] is True
    # Without the model, what a rule places in the user's words is still learnt.
    rules.refresh_from_db()
    assert "failed" not in rules.trace["reflection"]
    node = MemoryNode.objects.get(owner=user)
    assert node.description == "The user's sister is called Anna"
    assert node.source_message_id == rules.pk


def test_a_fault_of_ours_after_the_llm_gave_up_still_marks_the_reply_failed(
    celery_worker, user, turn, llm_stub, config, monkeypatch
):
    from apps.cognition import reflection as reflection_module

    config(critic_enabled=False)
    monkeypatch.setattr(tasks.reflect, "max_retries", 0)

    def broken(**_):
        raise RuntimeError("rules broke")

    monkeypatch.setattr(reflection_module, "grounded_statements", broken)
    reply = turn("My sister is called Anna", "Nice.")
    llm_stub.script({"fault": "http_500", "match": EXTRACT})

    tasks.reflect.delay(reply.pk)
    wait_for(lambda: Event.objects.filter(owner=user, kind="error").exists(), timeout=20)

    reply.refresh_from_db()
    assert reply.trace["reflection"]["failed"] is True
    assert "unexpected error: RuntimeError: rules broke" in reply.trace["reflection"]["error"]
    assert not MemoryNode.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_fact_true_only_for_a_while_gets_an_end_of_validity(user, turn, llm_stub, config):
    from datetime import timedelta

    config(critic_enabled=False)
    tomorrow = timezone.localdate() + timedelta(days=1)
    reply = turn("I have an exam tomorrow", "Good luck!")
    llm_stub.script(reflection("I have an exam tomorrow"))

    reflect_on_message(message_id=reply.pk)

    node = MemoryNode.objects.get(description="The user has an exam tomorrow")
    assert timezone.localtime(node.valid_until).date() == tomorrow
