"""Prompts a server can cache (issue #26, item 2): the system prompt stays the same from turn to
turn, what memory found for a message goes in a note before it, and each earlier message is
replayed with its note, so every turn's prompt begins with the whole of the previous one."""

from __future__ import annotations

import pytest

from apps.chat import services
from apps.chat.models import Conversation, Message
from apps.chat.selectors import history_kept
from apps.cognition.notes import NOTE_CLOSE, NOTE_OPEN
from apps.cognition.pipeline import prepare_saved_reply
from apps.core.models import RuntimeConfig
from apps.core.services import runtime_config_save
from apps.memory import browser_services, forget_services, graph_services
from apps.memory import services as memory_services
from apps.memory.models import MemoryNode

# Committed: the recall reads on pool threads, as in production.
pytestmark = pytest.mark.django_db(transaction=True)


def _turn(conversation: Conversation, text: str, answer: str):
    """One turn prepared as the chat prepares it, then finished with its trace."""
    reply = services.message_send(conversation=conversation, content=text).reply
    turn = prepare_saved_reply(reply_id=reply.pk)
    services.message_finish(
        message=reply, status=Message.Status.COMPLETE, content=answer, trace=turn.trace
    )
    return turn


@pytest.fixture
def conversation(user, llm_stub):
    runtime_config_save(config=RuntimeConfig(turns_per_minute=0, short_term_window=20))
    memory_services.memory_node_create(
        owner=user, description="The user's dog is called Argo", source="admin"
    )
    memory_services.memory_node_create(
        owner=user, description="The user lives in Turin", source="admin"
    )
    graph_services.triple_upsert(owner=user, subject="user", predicate="likes", object="espresso")
    return Conversation.objects.create(owner=user)


def test_each_prompt_begins_with_the_whole_of_the_one_before(conversation):
    turns = [
        _turn(conversation, "Tell me about my dog Argo", "Argo is your dog."),
        _turn(conversation, "And where do I live?", "In Turin."),
        _turn(conversation, "What do I like to drink?", "Espresso."),
        _turn(conversation, "Thanks!", "You are welcome."),
    ]

    for before, after in zip(turns, turns[1:], strict=False):
        assert after.messages[0] == before.messages[0], "the system prompt does not change"
        assert after.messages[: len(before.messages)] == before.messages
    first = turns[0].messages
    assert first[-1]["content"].startswith(NOTE_OPEN)
    assert first[-1]["content"].endswith(f"{NOTE_CLOSE}\n\nTell me about my dog Argo")
    assert "Argo" in first[-1]["content"] and "Argo" not in first[0]["content"]


def test_a_note_does_not_repeat_what_a_note_above_already_says(conversation):
    first = _turn(conversation, "Tell me about my dog Argo", "Argo is your dog.")
    second = _turn(conversation, "Tell me about my dog Argo again", "Again: Argo.")

    said = set(first.trace["note"]["memories"])
    assert said, "the first note quotes the memory"
    assert not said & set((second.trace.get("note") or {}).get("memories", []))
    assert second.trace["notes_replayed"] == 1
    # What the answer used still lists it: it is in the prompt, in the note above.
    assert said <= {m["id"] for m in second.trace["memory"]["memories"]}


def test_a_forgotten_memory_leaves_no_note_to_replay(conversation, user):
    first = _turn(conversation, "Tell me about my dog Argo", "Argo is your dog.")
    [argo] = [i for i in first.trace["note"]["memories"] if "Argo" in _description(i)]

    forget_services.memories_forget(node_ids=[argo])

    stored = Message.objects.get(pk=first.reply.pk).trace
    assert "note" not in stored, "the note quoting it is gone from the database"
    second = _turn(conversation, "What is my dog's name?", "I don't know.")
    assert "called Argo" not in "\n".join(m["content"] for m in second.messages)


def test_a_memory_marked_wrong_is_not_replayed(conversation):
    first = _turn(conversation, "Tell me about my dog Argo", "Argo is your dog.")
    [argo] = [i for i in first.trace["note"]["memories"] if "Argo" in _description(i)]

    browser_services.memory_node_mark_wrong(node=MemoryNode.objects.get(pk=argo))
    second = _turn(conversation, "What is my dog's name?", "I don't know.")

    assert second.trace["notes_replayed"] == 0
    assert "called Argo" not in "\n".join(m["content"] for m in second.messages)
    # The user's own words stay: only what memory added goes.
    assert second.messages[1] == {"role": "user", "content": "Tell me about my dog Argo"}


def test_the_history_window_moves_in_steps_so_the_prompt_start_holds():
    window = 10
    starts = [total - history_kept(total=total, window=window) for total in range(1, 40, 2)]

    assert all(history_kept(total=total, window=window) <= window for total in range(1, 40))
    assert all(start % 2 == 0 for start in starts), "the history starts with a user's message"
    changes = sum(1 for a, b in zip(starts, starts[1:], strict=False) if a != b)
    # One message a turn would change the start on every turn past the window (15 of 19).
    assert changes <= 8


def _description(node_id: int) -> str:
    return MemoryNode.objects.get(pk=node_id).description


def test_over_the_token_budget_old_history_goes_in_steps(user, llm_stub):
    runtime_config_save(
        config=RuntimeConfig(
            turns_per_minute=0, short_term_window=40, context_tokens=2048, answer_max_tokens=256
        )
    )
    conversation = Conversation.objects.create(owner=user)
    filler = " lorem ipsum" * 25  # ~100 tokens a message, as estimated
    starts = []
    for n in range(12):
        turn = _turn(conversation, f"question {n}{filler}", f"answer {n}{filler}")
        assert turn.trace["prompt_tokens_estimate"] <= turn.trace["limits"]["prompt_budget"]
        starts.append(turn.messages[1]["content"])

    dropping = [start for start in starts if not start.startswith("question 0 ")]
    assert len(dropping) >= 4, "the window forced older history out"
    # An exchange a turn would move the start on every one of those turns; it holds for
    # several.
    assert len(set(dropping)) <= len(dropping) / 2
    assert all(start.startswith("question") for start in starts), "from a user's message"
