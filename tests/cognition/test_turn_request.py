"""The answer's request: the system prompt, the last N messages, the token budget."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition.pipeline import prepare_saved_reply
from apps.cognition.turn_request import MessageTooLong, turn_history
from apps.core.llm.limits import CHAT, role_endpoint, token_counter
from apps.core.models import RuntimeConfig
from apps.core.services import runtime_config_save

pytestmark = pytest.mark.django_db


def _conversation(user, exchanges: int, filler: str = "") -> Conversation:
    conversation = Conversation.objects.create(owner=user)
    for n in range(exchanges):
        reply = services.message_send(conversation=conversation, content=f"question {n}{filler}")
        services.message_finish(
            message=reply.reply, status=Message.Status.COMPLETE, content=f"answer {n}{filler}"
        )
    return conversation


def test_the_request_is_the_system_prompt_and_the_last_n_messages(user, llm_stub):
    runtime_config_save(config=RuntimeConfig(short_term_window=4, turns_per_minute=0))
    conversation = _conversation(user, 6)
    reply = services.message_send(conversation=conversation, content="and now?").reply

    turn = prepare_saved_reply(reply_id=reply.pk)

    system, *history = turn.messages
    assert system["role"] == "system" and "{{" not in system["content"]
    assert timezone.localdate().isoformat() in system["content"]
    # Nobody's name: the system prompt's start is every user's (apps/cognition/system_prompt).
    assert "alice" not in system["content"]
    # Thirteen messages, a window of four moving in steps of two: the last three, from the
    # user's.
    assert history == [
        {"role": "user", "content": "question 5"},
        {"role": "assistant", "content": "answer 5"},
        {"role": "user", "content": "and now?"},
    ]
    assert turn.trace["history_messages"] == 3 and turn.trace["history_dropped"] == 0


def test_older_messages_beyond_the_models_window_are_dropped_the_newest_never(user, llm_stub):
    runtime_config_save(
        config=RuntimeConfig(
            short_term_window=10, context_tokens=1024, answer_max_tokens=256, turns_per_minute=0
        )
    )
    filler = " lorem ipsum" * 40  # ~150 tokens a message, as estimated
    conversation = _conversation(user, 5, filler)
    reply = services.message_send(conversation=conversation, content="and now?" + filler).reply

    turn = prepare_saved_reply(reply_id=reply.pk)

    system, *history = turn.messages
    assert 1 < len(history) < 10, "some kept, some dropped"
    assert history[-1] == {"role": "user", "content": "and now?" + filler}
    assert history[0]["content"] != "answer 0" + filler
    counter = token_counter(role_endpoint(CHAT))
    assert counter.messages(turn.messages) <= 1024 - 256
    assert turn.room.limits.reply_cap == 256
    assert turn.trace["history_dropped"] == len(turn_history(reply=reply)) - len(history) > 0
    assert turn.trace["limits"]["context"] == 1024

    # A new message too long for the window on its own is refused with a sentence.
    services.message_finish(message=reply, status=Message.Status.COMPLETE, content="ok")
    huge = services.message_send(conversation=conversation, content="long " * 800).reply
    with pytest.raises(MessageTooLong, match="too long for the model"):
        prepare_saved_reply(reply_id=huge.pk)


# Committed: the recall reads on pool threads, as in production.
@pytest.mark.django_db(transaction=True)
def test_over_the_window_the_least_relevant_knowledge_and_lowest_memories_go_first(user, llm_stub):
    from apps.cognition.turn_memory import memory_for_turn
    from apps.cognition.turn_request import build_turn
    from apps.memory import graph_services
    from apps.memory import services as memory_services
    from apps.memory.models import Triple

    runtime_config_save(
        config=RuntimeConfig(context_tokens=1024, answer_max_tokens=256, turns_per_minute=0)
    )
    graph_services.predicate_upsert(name="has_name", category="identity")
    graph_services.triple_upsert(owner=user, subject="user", predicate="has_name", object="Ada")
    for n in range(6):
        graph_services.triple_upsert(
            owner=user,
            subject="user",
            predicate=f"collects_{n}",
            object=f"old stamps from country number {n} " + "and more stamps " * 10,
            category="preferences",
        )
    for n in range(8):
        memory_services.memory_node_create(
            owner=user,
            description=f"The dog story number {n}: " + "dog " * (n + 1) + "park walk " * 40,
            importance=0.2 + n / 10,
            source="admin",
        )
    conversation = Conversation.objects.create(owner=user)
    reply = services.message_send(conversation=conversation, content="what about my dog?").reply
    history = turn_history(reply=reply)
    memory = memory_for_turn(user=user, conversation=conversation, text=history[-1].content)

    turn = build_turn(reply=reply, history=history, memory=memory)

    counter = token_counter(role_endpoint(CHAT))
    assert counter.messages(turn.messages) <= turn.trace["limits"]["prompt_budget"]
    dropped = turn.trace["memory"]["dropped_for_budget"]
    assert dropped["memories"] > 0 and dropped["triples"] > 0
    kept = {m["id"] for m in turn.trace["memory"]["memories"]}
    scores = {hit.id: hit.score for hit in memory.context.memories}
    assert min(scores[i] for i in kept) >= max(s for i, s in scores.items() if i not in kept)
    # Identity stays when other knowledge has to go, and the message's note says so.
    assert "Ada" in turn.messages[-1]["content"]
    ada = Triple.objects.get(object="Ada")
    assert [t["id"] for t in turn.trace["memory"]["triples"]][0] == ada.pk
