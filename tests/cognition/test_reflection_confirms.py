"""Reflection confirms a memory the user says again instead of adding a row, and the answer's
receipt says so (issue #29 item 5)."""

from __future__ import annotations

import pytest

from apps.chat.recall import recalled_texts
from apps.chat.receipts import receipt_for, receipt_nodes
from apps.cognition.reflection import reflect_on_message
from apps.memory.models import MemoryNode
from tests.cognition.conftest import reflection

# A write here that calls out (LLM, embedder) inside a transaction fails the test.
pytestmark = pytest.mark.usefixtures("no_outbound_in_atomic")


def _current(user) -> list[MemoryNode]:
    return list(MemoryNode.objects.filter(owner=user, valid_to=None).order_by("pk"))


@pytest.mark.django_db(transaction=True)
def test_reflection_confirms_a_memory_said_again_and_the_receipt_says_so(
    user, turn, llm_stub, config
):
    config(critic_enabled=False)
    first = turn("I love espresso", "Lovely.")
    # A small model says the same thing twice in one reply.
    llm_stub.script(reflection("I love espresso", "I love espresso"))
    reflect_on_message(message_id=first.pk)
    (node,) = _current(user)
    started = node.confidence_score
    first.refresh_from_db()
    assert first.trace["reflection"]["created"] == [node.pk]
    assert not first.trace["reflection"].get("confirmed")

    second = turn("As I said, I love espresso", "Yes.")
    llm_stub.script(reflection("I love espresso"))
    reflect_on_message(message_id=second.pk)

    (again,) = _current(user)
    assert again.pk == node.pk and again.confidence_score == started + 1
    second.refresh_from_db()
    outcome = second.trace["reflection"]
    assert (outcome["created"], outcome["confirmed"]) == ([], [node.pk])
    receipt = receipt_for(
        second,
        receipt_nodes(conversation_id=second.conversation_id, messages=[second]),
        recalled_texts(conversation_id=second.conversation_id, messages=[second]),
    )
    assert [n.pk for n in receipt.confirmed_nodes] == [node.pk]
    assert ("Confirmed by this exchange", [(node, "rules + model")]) in receipt.groups
