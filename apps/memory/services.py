from __future__ import annotations

import logging
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.memory.embedding import (
    Embedder,
    EmbeddingConfigError,
    EmbeddingError,
    get_embedder,
    vector_literal,
)
from apps.memory.models import (
    Category,
    EmbeddingStatus,
    Episode,
    MemoryLink,
    MemoryNode,
    Predicate,
    RetrievalPlan,
    Triple,
)
from apps.memory.schemas import RetrievalPlanSchema, canonical_predicate_name

logger = logging.getLogger(__name__)

EMBED_BATCH = 128


def _try_embed(text: str) -> tuple[list[float] | None, str]:
    """A vector and the embedder's marker, or (None, "") when embedding is impossible now."""
    try:
        embedder = get_embedder()
        return embedder.embed([text])[0], embedder.marker
    except EmbeddingError as exc:
        logger.warning("embedding deferred: %s", exc)
        return None, ""


def _embed_later() -> None:
    from apps.memory.tasks import embed_pending

    embed_pending.delay_on_commit()


def memory_node_create(
    *,
    owner: AbstractBaseUser | None,
    description: str,
    kind: str = MemoryNode.Kind.FACT,
    topic: str = "",
    fact_key: str = "",
    importance: float = 0.5,
    confidence_score: int = 1,
    state: str = MemoryNode.State.VOLATILE,
    origin_context: str = "",
    source_message: Message | None = None,
    embed: bool = True,
) -> MemoryNode:
    """Store a memory; a fact whose key already has a current value evolves that value.

    The current row keeps its id (links and traces still point at it); its previous value is
    copied into a superseded row. Without a vector (embedder down, or `embed=False`) the node is
    saved pending and a task embeds it after commit.
    """
    description = description.strip()
    embedding_text = f"{topic}: {description}" if topic else description
    vector, marker = _try_embed(embedding_text) if embed else (None, "")
    now = timezone.now()
    status = EmbeddingStatus.READY if vector is not None else EmbeddingStatus.PENDING
    embedding_fields = {"embedding": vector, "embedding_model": marker, "embedding_status": status}
    with transaction.atomic():
        current = None
        if fact_key:
            current = (
                MemoryNode.objects.select_for_update()
                .filter(owner=owner, fact_key=fact_key, valid_to=None)
                .first()
            )
        if current is not None and _same_text(current.description, description):
            return current
        if current is not None:
            MemoryNode.objects.create(
                owner=current.owner,
                description=current.description,
                kind=current.kind,
                topic=current.topic,
                fact_key=current.fact_key,
                state=current.state,
                confidence_score=current.confidence_score,
                importance=current.importance,
                origin_context=current.origin_context,
                source_message_id=current.source_message_id,
                embedding=current.embedding,
                embedding_status=current.embedding_status,
                embedding_model=current.embedding_model,
                created_at=current.created_at,
                last_accessed_at=current.last_accessed_at,
                valid_to=now,
                superseded_by=current,
            )
            node = current
            node.description = description
            node.kind = kind
            node.topic = topic
            node.importance = importance
            node.origin_context = origin_context
            node.source_message = source_message
            for name, value in embedding_fields.items():
                setattr(node, name, value)
            node.save()
        else:
            node = MemoryNode.objects.create(
                owner=owner,
                description=description,
                kind=kind,
                topic=topic,
                fact_key=fact_key,
                state=state,
                confidence_score=confidence_score,
                importance=importance,
                origin_context=origin_context,
                source_message=source_message,
                created_at=now,
                **embedding_fields,
            )
        if vector is None:
            _embed_later()
    return node


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def memory_nodes_mark_accessed(*, node_ids: list[int]) -> int:
    if not node_ids:
        return 0
    return MemoryNode.objects.filter(id__in=node_ids).update(last_accessed_at=timezone.now())


def episode_create(
    *,
    owner: AbstractBaseUser,
    summary: str,
    conversation: Conversation | None = None,
    decisions: str = "",
    outcome: str = "",
    lesson: str = "",
    messages: list[Message] | None = None,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    embed: bool = True,
) -> Episode:
    now = timezone.now()
    episode = Episode(
        owner=owner,
        conversation=conversation,
        summary=summary.strip(),
        decisions=decisions,
        outcome=outcome,
        lesson=lesson,
        started_at=started_at or now,
        ended_at=ended_at or now,
    )
    vector, marker = _try_embed(episode.embedding_text) if embed else (None, "")
    if vector is not None:
        episode.embedding = vector
        episode.embedding_model = marker
        episode.embedding_status = EmbeddingStatus.READY
    with transaction.atomic():
        episode.save()
        if messages:
            episode.messages.set(messages)
        if vector is None:
            _embed_later()
    return episode


def _set_embeddings(
    *, table: str, ids: list[int], vectors: list[list[float]], marker: str, only_pending: bool
) -> int:
    """Write many vectors in one statement."""
    condition = "AND t.embedding_status = 'pending'" if only_pending else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {table} AS t
               SET embedding = v.embedding::vector,
                   embedding_model = %s,
                   embedding_status = 'ready'
              FROM unnest(%s::bigint[], %s::text[]) AS v(id, embedding)
             WHERE t.id = v.id {condition}
            """,
            [marker, ids, [vector_literal(vector) for vector in vectors]],
        )
        return cursor.rowcount


def _rows_to_embed(model: type[MemoryNode] | type[Episode], queryset, limit: int):
    rows = list(queryset.order_by("id")[:limit])
    return [row.id for row in rows], [row.embedding_text for row in rows]


def embeddings_fill_pending(
    *, batch_size: int = EMBED_BATCH, embedder: Embedder | None = None
) -> int:
    """Embed every pending node and episode; returns how many were embedded.

    Safe to run concurrently or twice: only rows still pending are written. An embedder that can
    never succeed as configured marks the batch failed rather than retrying forever.
    """
    embedder = embedder or get_embedder()
    done = 0
    for model in (MemoryNode, Episode):
        last_id = 0
        while True:
            pending = model.objects.filter(embedding_status=EmbeddingStatus.PENDING, id__gt=last_id)
            ids, texts = _rows_to_embed(model, pending, batch_size)
            if not ids:
                break
            last_id = ids[-1]
            try:
                vectors = embedder.embed(texts)
            except EmbeddingConfigError:
                model.objects.filter(id__in=ids, embedding_status=EmbeddingStatus.PENDING).update(
                    embedding_status=EmbeddingStatus.FAILED
                )
                raise
            done += _set_embeddings(
                table=model._meta.db_table,
                ids=ids,
                vectors=vectors,
                marker=embedder.marker,
                only_pending=True,
            )
    return done


def embeddings_refresh_batch(
    *, model: type[MemoryNode] | type[Episode], embedder: Embedder, batch_size: int = EMBED_BATCH
) -> int:
    """Re-embed one batch of rows whose vector was not made by `embedder`; 0 when none is left."""
    stale = model.objects.filter(~Q(embedding_model=embedder.marker) | Q(embedding=None))
    ids, texts = _rows_to_embed(model, stale, batch_size)
    if not ids:
        return 0
    vectors = embedder.embed(texts)
    _set_embeddings(
        table=model._meta.db_table,
        ids=ids,
        vectors=vectors,
        marker=embedder.marker,
        only_pending=False,
    )
    return len(ids)


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
) -> Triple:
    """Record a statement; restating it raises its confidence, and a new value of a
    single-valued predicate (a name) closes the old one instead of adding a second."""
    canonical = predicate_resolve(name=predicate, category=category)
    subject = subject.strip()
    object = object.strip()
    now = timezone.now()
    with transaction.atomic():
        current = list(
            Triple.objects.select_for_update().filter(
                owner=owner, subject__iexact=subject, predicate=canonical, valid_to=None
            )
        )
        for triple in current:
            if _same_text(triple.object, object):
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


def memory_link_upsert(
    *, source: MemoryNode, target: MemoryNode, kind: str, score: float
) -> MemoryLink:
    link, _ = MemoryLink.objects.update_or_create(
        source=source, target=target, kind=kind, defaults={"score": score}
    )
    return link


def retrieval_plan_save(*, conversation: Conversation, steps: list[dict]) -> RetrievalPlan:
    """Store the next turn's plan; raises pydantic.ValidationError on a malformed one."""
    plan = RetrievalPlanSchema.model_validate({"steps": steps})
    stored, _ = RetrievalPlan.objects.update_or_create(
        conversation=conversation,
        defaults={"steps": [step.model_dump(mode="json") for step in plan.steps]},
    )
    return stored
