"""The answer's request: the system prompt, the last N messages, the token budget."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.cognition.answer import estimate_tokens, prepare_turn
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

    turn = prepare_turn(reply_id=reply.pk)

    system, *history = turn.messages
    assert system["role"] == "system" and "{{" not in system["content"]
    assert timezone.localdate().isoformat() in system["content"]
    assert "You are talking with alice." in system["content"]
    assert history == [
        {"role": "assistant", "content": "answer 4"},
        {"role": "user", "content": "question 5"},
        {"role": "assistant", "content": "answer 5"},
        {"role": "user", "content": "and now?"},
    ]
    assert turn.trace["history_messages"] == 4 and turn.trace["history_dropped"] == 0


def test_older_messages_beyond_the_token_budget_are_dropped_the_newest_never(user, llm_stub):
    runtime_config_save(
        config=RuntimeConfig(short_term_window=10, token_budget=256, turns_per_minute=0)
    )
    filler = " lorem ipsum" * 12  # ~37 tokens a message
    conversation = _conversation(user, 5, filler)
    reply = services.message_send(conversation=conversation, content="and now?" + filler).reply

    turn = prepare_turn(reply_id=reply.pk)

    system, *history = turn.messages
    assert 1 < len(history) < 10, "some kept, some dropped"
    assert history[-1] == {"role": "user", "content": "and now?" + filler}
    assert history[0]["content"] != "answer 0" + filler
    kept = estimate_tokens(system["content"]) + sum(estimate_tokens(m["content"]) for m in history)
    assert kept <= 256
    assert turn.trace["history_dropped"] == 10 - len(history)

    # A new message longer than the whole budget is still sent, alone.
    services.message_finish(message=reply, status=Message.Status.COMPLETE, content="ok")
    huge = services.message_send(conversation=conversation, content="long " * 400).reply
    assert prepare_turn(reply_id=huge.pk).messages[1:] == [
        {"role": "user", "content": ("long " * 400).strip()}
    ]
