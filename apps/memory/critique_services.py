"""The critic's verdicts recorded: each moves its memory's confidence by one, once per turn."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, Value, When

from apps.chat.models import Message
from apps.core.models import Event
from apps.core.services import event_record
from apps.memory.models import Critique, MemoryNode

# A critic's verdict as the mind stream says it, by the change it made.
_VERDICT_WORDS = {
    1: "it holds, so I trust it more",
    -1: "it may not hold, so I trust it less",
    0: "it may not hold, but you said it yourself, so I trust it as before",
}


def critique_record(
    *,
    node_id: int,
    message: Message | None,
    verdict: str,
    debate: str,
    model: str = "",
    contradicts: list[int] | None = None,
    supports: list[int] | None = None,
):
    """Store the critic's verdict and move the node's confidence by one, atomically.

    The user's own words (source user) are not argued down: a failing verdict on them is kept,
    with its debate, and moves nothing. They lose confidence only to the user's later words
    (a new value of the fact) or to the user marking them wrong. An inference can be.

    Returns None when the node is gone (decayed, superseded) or this turn already judged it, so
    a redelivered task never counts a verdict twice. The increment is an F() expression: two
    critics judging one node at once both count.
    """
    withstands = verdict == Critique.Verdict.WITHSTANDS
    said = Q(source=MemoryNode.Source.USER)
    change = Value(1) if withstands else Case(When(said, then=Value(0)), default=Value(-1))
    try:
        with transaction.atomic():
            changed = MemoryNode.objects.filter(pk=node_id, valid_to=None).update(
                confidence_score=F("confidence_score") + change
            )
            if not changed:
                return None
            node = MemoryNode.objects.select_related("owner").get(pk=node_id)
            kept = not withstands and node.source == MemoryNode.Source.USER
            delta = 1 if withstands else 0 if kept else -1
            critique = Critique.objects.create(
                node=node,
                owner=node.owner,
                message=message,
                verdict=verdict,
                debate=debate.strip(),
                delta=delta,
                model=model,
                contradicts=sorted(set(contradicts or [])),
                supports=sorted(set(supports or [])),
            )
            event_record(
                kind=Event.Kind.CRITIQUE,
                summary=(
                    f"Checked a memory against what you said; {_VERDICT_WORDS[delta]}"
                    f" (now {round(node.confidence * 100)}%): {node.description[:200]}"
                ),
                owner=node.owner,
                payload={
                    "node_id": node_id,
                    "critique_id": critique.pk,
                    "verdict": verdict,
                    "delta": delta,
                    "confidence": node.confidence_score,
                    "message_id": message.pk if message else None,
                },
            )
    except IntegrityError:
        return None
    return critique
