"""Corrections a person can take back: "Wrong" and "Forget" on one memory, each with an Undo.

Wrong (`browser_services.memory_node_mark_wrong`) closes the memory, kept as history and never
recalled, and retracts the facts that restate it; its Undo opens both again, from the ids its
event keeps.

Forget means forget, so it cannot keep a copy to restore from. It works in two steps instead:
at once the memory is closed and its facts retracted, as Wrong does, so no answer from then on
recalls either; UNDO_SECONDS later (or when its owner dismisses the notice) it is forgotten for
good with everything that quotes it (`browser_services.memory_nodes_forget`). Until then its
pending event marks it; whichever of Undo and the final forgetting deletes that event first
wins, so the two never both happen. A task queued with the forgetting finishes it if the page
is closed, and the hourly decay finishes any pending one the task missed (a worker down).
"""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from apps.core.models import Event
from apps.core.services import event_record, task_send_on_commit
from apps.memory import browser_services, forget_services
from apps.memory.models import MemoryNode, Triple

# How long the page offers Undo; the memory is forgotten for good at the latest this long after.
UNDO_SECONDS = 10
FORGET_GRACE_SECONDS = UNDO_SECONDS + 20

WRONG = "wrong"  # the action browser_services.memory_node_mark_wrong records
FORGET_PENDING = "forget_pending"


class CannotUndo(Exception):
    """The correction can no longer be taken back; the message says why."""


def _close(node: MemoryNode) -> list[int]:
    """Close a current memory and retract the facts restating it; the facts' ids."""
    MemoryNode.objects.filter(pk=node.pk, valid_to=None).update(valid_to=timezone.now())
    node.refresh_from_db(fields=["valid_to"])
    return forget_services.triples_retract_restating(node=node)


def _reopen(node: MemoryNode, triple_ids: list[int]) -> int:
    """Make a memory current again, with the facts retracted with it; how many facts came back.

    A newer value of the same fact (its fact_key), or the same statement learnt again since,
    is current now and stays so: the memory or fact it would duplicate is not reopened.
    """
    if (
        node.fact_key
        and MemoryNode.objects.filter(owner_id=node.owner_id, fact_key=node.fact_key, valid_to=None)
        .exclude(pk=node.pk)
        .exists()
    ):
        raise CannotUndo("A newer version of this memory has replaced it since.")
    MemoryNode.objects.filter(pk=node.pk, superseded_by=None).update(valid_to=None)
    node.refresh_from_db(fields=["valid_to"])
    same_current = Triple.objects.filter(
        owner_id=OuterRef("owner_id"),
        subject=OuterRef("subject"),
        predicate_id=OuterRef("predicate_id"),
        object=OuterRef("object"),
        valid_to=None,
    )
    return (
        Triple.objects.filter(owner_id=node.owner_id, pk__in=triple_ids)
        .exclude(valid_to=None)
        .exclude(Exists(same_current))
        .update(valid_to=None)
    )


@transaction.atomic
def memory_node_unmark_wrong(*, node: MemoryNode) -> MemoryNode:
    """Undo of Wrong: the memory and the facts retracted with it are current again."""
    marked = (
        Event.objects.filter(
            owner_id=node.owner_id,
            kind=Event.Kind.EDIT,
            payload__action=WRONG,
            payload__node_id=node.pk,
        )
        .order_by("-created_at", "-id")
        .first()
    )
    if marked is None or node.is_current or node.superseded_by_id is not None:
        raise CannotUndo("This memory is not marked wrong.")
    restored = _reopen(node, marked.payload.get("triple_ids") or [])
    event_record(
        kind=Event.Kind.EDIT,
        owner=node.owner,
        summary=f"You took back “wrong”, so I use this again: {node.description[:200]}",
        payload={"action": "unwrong", "node_id": node.pk, "triples": restored},
    )
    return node


def _pending(node_id: int):
    return Event.objects.filter(
        kind=Event.Kind.EDIT, payload__action=FORGET_PENDING, payload__node_id=node_id
    )


@transaction.atomic
def memory_node_forget_soon(*, node: MemoryNode) -> MemoryNode:
    """Forget one memory, with UNDO_SECONDS to take it back (see the module's docstring)."""
    retracted = _close(node)
    event_record(
        kind=Event.Kind.EDIT,
        owner=node.owner,
        summary="You asked me to forget a memory; I no longer use it, and it goes for good "
        "in a few seconds.",
        payload={"action": FORGET_PENDING, "node_id": node.pk, "triple_ids": retracted},
    )
    task_send_on_commit("memory.forget_pending", node.pk, countdown=FORGET_GRACE_SECONDS)
    return node


@transaction.atomic
def memory_node_unforget(*, node: MemoryNode) -> MemoryNode:
    """Undo of Forget, before the memory went for good: it is current again, with its facts."""
    pending = _pending(node.pk).filter(owner_id=node.owner_id).first()
    # Deleting the pending event is the claim: the final forgetting deletes it too.
    if pending is None or not Event.objects.filter(pk=pending.pk).delete()[0]:
        raise CannotUndo("Too late: this memory is forgotten for good.")
    restored = _reopen(node, pending.payload.get("triple_ids") or [])
    event_record(
        kind=Event.Kind.EDIT,
        owner=node.owner,
        summary=f"You took back “forget”, so I keep this: {node.description[:200]}",
        payload={"action": "unforget", "node_id": node.pk, "triples": restored},
    )
    return node


@transaction.atomic
def memory_node_forget_now(*, node_id: int) -> forget_services.ForgetReceipt | None:
    """Forget for good a memory whose Forget is pending; None when it is not (undone, or
    already forgotten)."""
    if not _pending(node_id).delete()[0]:
        return None
    # It was closed only to hide it: current again for the statement that deletes it, it is
    # counted as the memory forgotten, not as an earlier version (no other transaction sees it).
    newer_of_its_fact = MemoryNode.objects.filter(
        owner_id=OuterRef("owner_id"), fact_key=OuterRef("fact_key"), valid_to=None
    ).exclude(fact_key="")
    MemoryNode.objects.filter(pk=node_id, superseded_by=None).exclude(
        Exists(newer_of_its_fact)
    ).update(valid_to=None)
    return browser_services.memory_nodes_forget(node_ids=[node_id])


def memories_forget_overdue() -> int:
    """Finish the pending forgets older than FORGET_GRACE_SECONDS (their task was lost); how
    many."""
    cutoff = timezone.now() - timedelta(seconds=FORGET_GRACE_SECONDS)
    node_ids = list(
        Event.objects.filter(
            kind=Event.Kind.EDIT, payload__action=FORGET_PENDING, created_at__lt=cutoff
        ).values_list("payload__node_id", flat=True)
    )
    return sum(memory_node_forget_now(node_id=node_id) is not None for node_id in node_ids)
