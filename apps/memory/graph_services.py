"""The knowledge graph written: predicates resolved or extended, and triples stated, restated
or replaced; a statement that reads as an instruction is held for approval instead."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.chat.models import Message
from apps.memory.models import Category, MemoryNode, Predicate, Triple
from apps.memory.quarantine import looks_like_instruction
from apps.memory.schemas import canonical_predicate_name, same_text
from apps.memory.services import memory_hold


def predicate_resolve(*, name: str, category: str | None = None) -> Predicate:
    """The canonical predicate for a name or any of its aliases, created when unknown."""
    canonical = canonical_predicate_name(name)
    if not canonical:
        raise ValueError("A predicate needs a name.")
    matches = Predicate.objects.filter(Q(name=canonical) | Q(aliases__contains=[canonical]))
    found = sorted(matches, key=lambda predicate: (predicate.name != canonical, predicate.id))
    if found:
        return found[0]
    predicate, _ = Predicate.objects.get_or_create(
        name=canonical, defaults={"category": category or Category.KNOWLEDGE}
    )
    return predicate


def predicate_upsert(
    *,
    name: str,
    category: str = Category.KNOWLEDGE,
    aliases: list[str] | None = None,
    labels: dict[str, str] | None = None,
    single_valued: bool = False,
) -> Predicate:
    """Create or extend a predicate: aliases are added, labels filled in, never removed."""
    canonical = canonical_predicate_name(name)
    alias_names = sorted(
        {canonical_predicate_name(alias) for alias in aliases or []} - {canonical, ""}
    )
    with transaction.atomic():
        predicate, created = Predicate.objects.select_for_update().get_or_create(
            name=canonical,
            defaults={
                "category": category,
                "aliases": alias_names,
                "labels": labels or {},
                "single_valued": single_valued,
            },
        )
        if not created:
            predicate.aliases = sorted(set(predicate.aliases) | set(alias_names))
            predicate.labels = {**(labels or {}), **predicate.labels}
            predicate.save(update_fields=["aliases", "labels"])
    return predicate


class TripleHeld(ValueError):
    """The triple was not stored: it reads as an instruction, and waits as a quarantined
    memory (`node`) for the user's approval."""

    def __init__(self, node: MemoryNode):
        super().__init__("held for the user's approval: it reads as an instruction")
        self.node = node


def triple_upsert(
    *,
    owner: AbstractBaseUser | None,
    subject: str,
    predicate: str,
    object: str,
    category: str | None = None,
    confidence: float = 0.5,
    provenance: str = "",
    source_message: Message | None = None,
    source: str = MemoryNode.Source.INFERRED,
) -> Triple:
    """Record a statement; restating it raises its confidence, and a new value of a
    single-valued predicate (a name) closes the old one instead of adding a second.

    A subject or object that reads as an instruction is held (`memory_hold`) instead, and
    TripleHeld raised: facts reach the answer's prompt.
    """
    subject = subject.strip()
    object = object.strip()
    if owner is not None and (looks_like_instruction(subject) or looks_like_instruction(object)):
        held = memory_hold(
            owner=owner,
            text=f"{subject} {predicate}: {object}",
            held_from="fact",
            source=source,
            source_message=source_message,
        )
        raise TripleHeld(held)
    canonical = predicate_resolve(name=predicate, category=category)
    now = timezone.now()
    with transaction.atomic():
        current = list(
            Triple.objects.select_for_update().filter(
                owner=owner, subject__iexact=subject, predicate=canonical, valid_to=None
            )
        )
        for triple in current:
            if same_text(triple.object, object):
                triple.confidence = max(triple.confidence, confidence)
                if provenance:
                    triple.provenance = provenance
                if source_message is not None:
                    triple.source_message = source_message
                triple.save(update_fields=["confidence", "provenance", "source_message"])
                return triple
        if canonical.single_valued and current:
            Triple.objects.filter(id__in=[triple.id for triple in current]).update(valid_to=now)
        return Triple.objects.create(
            owner=owner,
            subject=subject,
            predicate=canonical,
            object=object,
            category=category or canonical.category,
            confidence=confidence,
            provenance=provenance,
            source_message=source_message,
            valid_from=now,
        )
