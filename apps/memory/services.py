from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, models, transaction
from django.db.models import Q
from django.utils import timezone

from apps.chat.models import Conversation, Message
from apps.core.services import task_send_on_commit
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
    EpisodeFailure,
    MemoryLink,
    MemoryNode,
    Predicate,
    RetrievalPlan,
    Triple,
    WorldState,
)
from apps.memory.schemas import (
    WORLD_LIST_PATHS,
    RetrievalPlanSchema,
    WorldOp,
    canonical_predicate_name,
    world_op_parse,
)

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
    # By name: memory's tasks import these services, not the other way round.
    task_send_on_commit("memory.embed_pending")


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
    source: str | None = None,
    quote: str = "",
    embed: bool = True,
    vector: list[float] | None = None,
) -> MemoryNode:
    """Store a memory; a fact whose key already has a current value evolves that value.

    `vector`, when the caller already embedded "topic: description", saves embedding it again.
    `source` by default: inferred from the message that formed it, else added by an admin.

    The current row keeps its id (links and traces still point at it); its previous value is
    copied into a superseded row. Without a vector (embedder down, or `embed=False`) the node is
    saved pending and a task embeds it after commit.
    """
    description = description.strip()
    if source is None:
        source = MemoryNode.Source.INFERRED if source_message else MemoryNode.Source.ADMIN
    embedding_text = f"{topic}: {description}" if topic else description
    if vector is not None:
        marker = get_embedder().marker
    else:
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
            _copy_into_history(current=current, now=now)
            node = current
            node.description = description
            node.kind = kind
            node.topic = topic
            node.importance = importance
            node.origin_context = origin_context
            node.source_message = source_message
            node.source = source
            node.quote = quote
            node.valid_from = now
            node.valid_until = None
            node.last_accessed_at = now
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
                start_confidence=confidence_score,
                importance=importance,
                origin_context=origin_context,
                source_message=source_message,
                source=source,
                quote=quote,
                created_at=now,
                valid_from=now,
                **embedding_fields,
            )
        if vector is None:
            _embed_later()
    return node


def _copy_into_history(*, current: MemoryNode, now: datetime) -> MemoryNode:
    """A superseded copy of a node's present value, before the node (same id) changes."""
    return MemoryNode.objects.create(
        owner=current.owner,
        description=current.description,
        kind=current.kind,
        topic=current.topic,
        fact_key=current.fact_key,
        state=current.state,
        confidence_score=current.confidence_score,
        start_confidence=current.start_confidence,
        importance=current.importance,
        origin_context=current.origin_context,
        source_message_id=current.source_message_id,
        source=current.source,
        quote=current.quote,
        embedding=current.embedding,
        embedding_status=current.embedding_status,
        embedding_model=current.embedding_model,
        created_at=current.created_at,
        last_accessed_at=current.last_accessed_at,
        valid_from=current.valid_from,
        valid_until=current.valid_until,
        valid_to=now,
        superseded_by=current,
    )


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


def episode_failure_record(
    *, conversation: Conversation, through_message_id: int, attempts: int, error: str
) -> EpisodeFailure:
    """Mark the stretch up to `through_message_id` as one no summary could be made of."""
    failure, _ = EpisodeFailure.objects.update_or_create(
        conversation=conversation,
        defaults={
            "through_message_id": through_message_id,
            "attempts": attempts,
            "error": error[:2000],
            "failed_at": timezone.now(),
        },
    )
    return failure


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


# --- the CLAM cycle: revise, doubt, consolidate, forget ---------------------------------------


def memory_nodes_near(
    *,
    owner_id: int,
    vector: list[float],
    limit: int,
    state: str | None = None,
    exclude_ids: list[int] | tuple[int, ...] = (),
) -> list[tuple[MemoryNode, float]]:
    """The owner's current nodes closest to a vector, with their cosine similarity."""
    from pgvector.django import CosineDistance

    nodes = (
        MemoryNode.objects.filter(owner_id=owner_id, valid_to=None)
        .exclude(embedding=None)
        .exclude(state=MemoryNode.State.QUARANTINED)
    )
    if state:
        nodes = nodes.filter(state=state)
    if exclude_ids:
        nodes = nodes.exclude(id__in=list(exclude_ids))
    nodes = nodes.annotate(distance=CosineDistance("embedding", vector)).order_by("distance")
    with transaction.atomic(), connection.cursor() as cursor:
        # See DESIGN.md: a per-user filter otherwise starves the HNSW scan.
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        found = list(nodes[:limit])
    return [(node, 1.0 - float(node.distance)) for node in found]


def memory_node_revise(
    *,
    node: MemoryNode,
    description: str,
    importance: float | None = None,
    origin_context: str = "",
    source_message: Message | None = None,
    source: str | None = None,
    quote: str = "",
) -> MemoryNode:
    """Give a node a new value, keeping the old one as a superseded row (as fact keys do).

    The new value's `source` and `quote` replace the old ones; without a source, both stay.
    """
    if node.fact_key:
        return memory_node_create(
            owner=node.owner,
            description=description,
            kind=node.kind,
            topic=node.topic,
            fact_key=node.fact_key,
            importance=node.importance if importance is None else importance,
            origin_context=origin_context or node.origin_context,
            source_message=source_message,
            source=source or node.source,
            quote=quote if source else node.quote,
        )
    description = description.strip()
    text = f"{node.topic}: {description}" if node.topic else description
    vector, marker = _try_embed(text)
    with transaction.atomic():
        current = MemoryNode.objects.select_for_update().get(pk=node.pk)
        if _same_text(current.description, description):
            return current
        now = timezone.now()
        _copy_into_history(current=current, now=now)
        current.description = description
        current.valid_from = now
        current.valid_until = None
        current.last_accessed_at = now
        if importance is not None:
            current.importance = importance
        current.origin_context = origin_context or current.origin_context
        current.source_message = source_message or current.source_message
        if source:
            current.source, current.quote = source, quote
        current.embedding = vector
        current.embedding_model = marker
        current.embedding_status = (
            EmbeddingStatus.READY if vector is not None else EmbeddingStatus.PENDING
        )
        current.save()
        if vector is None:
            _embed_later()
    return current


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

    Returns None when the node is gone (decayed, superseded) or this turn already judged it, so
    a redelivered task never counts a verdict twice. The increment is an F() expression: two
    critics judging one node at once both count.
    """
    from django.db import IntegrityError
    from django.db.models import F

    from apps.core.models import Event
    from apps.core.services import event_record
    from apps.memory.models import Critique

    delta = 1 if verdict == Critique.Verdict.WITHSTANDS else -1
    try:
        with transaction.atomic():
            changed = MemoryNode.objects.filter(pk=node_id, valid_to=None).update(
                confidence_score=F("confidence_score") + delta
            )
            if not changed:
                return None
            node = MemoryNode.objects.select_related("owner").get(pk=node_id)
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
                summary=f"{verdict}: {node.description[:200]} (confidence {node.confidence_score})",
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


_PROMOTION_PAIRS_SQL = """
WITH candidates AS MATERIALIZED (
    SELECT id, owner_id, embedding, created_at FROM memory_memorynode
     WHERE state = 'volatile' AND valid_to IS NULL AND confidence_score >= %(threshold)s
     ORDER BY id
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
)
SELECT c.id, c.owner_id, near.id, near.similarity, near.created_at < c.created_at
  FROM candidates AS c
  LEFT JOIN LATERAL (
      -- Exact search over the owner's long-term nodes, found through a partial index on owner
      -- (the HNSW index filters poorly at one owner's selectivity). Owned and global candidates
      -- take separate branches so each matches the owner with a plain, indexable `=`.
      SELECT n.id, n.created_at, 1 - (n.embedding <=> c.embedding) AS similarity
        FROM memory_memorynode AS n
       WHERE c.embedding IS NOT NULL AND n.embedding IS NOT NULL
         AND c.owner_id IS NOT NULL AND n.owner_id = c.owner_id
         AND n.state = 'promoted' AND n.valid_to IS NULL
      UNION ALL
      SELECT n.id, n.created_at, 1 - (n.embedding <=> c.embedding) AS similarity
        FROM memory_memorynode AS n
       WHERE c.embedding IS NOT NULL AND n.embedding IS NOT NULL
         AND c.owner_id IS NULL AND n.owner_id IS NULL
         AND n.state = 'promoted' AND n.valid_to IS NULL
       ORDER BY similarity DESC
       LIMIT %(neighbours)s
  ) AS near ON near.similarity >= %(link_similarity)s
 ORDER BY c.id, near.similarity DESC NULLS LAST
"""


@dataclass
class PromotionResult:
    promoted: list[int] = field(default_factory=list)
    merged: dict[int, int] = field(default_factory=dict)
    superseded: dict[int, int] = field(default_factory=dict)
    links: list[tuple[int, int, str, float]] = field(default_factory=list)


def memories_promote_and_link(
    *,
    threshold: int,
    batch_size: int,
    link_similarity: float,
    duplicate_similarity: float,
    neighbours: int,
) -> PromotionResult:
    """One pass of consolidation over at most `batch_size` confident volatile nodes.

    Each candidate is compared with the owner's long-term nodes: a near-duplicate merges into
    the older node; otherwise it is linked (similar, or supports / contradicts as its critic
    found) and promoted, and a long-term fact it contradicts is superseded, not deleted.
    Candidates are locked (SKIP LOCKED) so two passes never consolidate one node twice.
    """
    from apps.memory.models import Critique

    result = PromotionResult()
    now = timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            cursor.execute(
                _PROMOTION_PAIRS_SQL,
                {
                    "threshold": threshold,
                    "batch": batch_size,
                    "neighbours": neighbours,
                    "link_similarity": link_similarity,
                },
            )
            rows = cursor.fetchall()
        if not rows:
            return result
        owners: dict[int, int | None] = {}
        neighbours: dict[int, list[tuple[int, float, bool]]] = {}
        for candidate, owner_id, near, similarity, near_is_older in rows:
            owners[candidate] = owner_id
            neighbours.setdefault(candidate, [])
            if near is not None:
                neighbours[candidate].append((near, float(similarity), bool(near_is_older)))
        judged: dict[int, tuple[set[int], set[int]]] = {}
        for node_id, contradicts, supports in Critique.objects.filter(
            node_id__in=list(owners)
        ).values_list("node_id", "contradicts", "supports"):
            against, towards = judged.setdefault(node_id, (set(), set()))
            against.update(contradicts)
            towards.update(supports)

        for candidate, near in neighbours.items():
            against, towards = judged.get(candidate, (set(), set()))
            duplicate = next(
                (n for n, score, _ in near if score >= duplicate_similarity and n not in against),
                None,
            )
            if duplicate is not None:
                result.merged[candidate] = duplicate
                continue
            result.promoted.append(candidate)
            for n, score, near_is_older in near:
                if n in against:
                    result.links.append((candidate, n, MemoryLink.Kind.CONTRADICTS, score))
                    if near_is_older and n not in result.superseded:
                        result.superseded[n] = candidate
                elif n in towards:
                    result.links.append((candidate, n, MemoryLink.Kind.SUPPORTS, score))
                else:
                    result.links.append((candidate, n, MemoryLink.Kind.SIMILAR, score))

        _supersede(result.merged, now)
        if result.merged:
            # The long-term node was just told again what it already knew.
            MemoryNode.objects.filter(id__in=set(result.merged.values())).update(
                confidence_score=models.F("confidence_score") + 1, last_accessed_at=now
            )
        _supersede(result.superseded, now)
        MemoryNode.objects.filter(
            id__in=result.promoted, state=MemoryNode.State.VOLATILE, valid_to=None
        ).update(state=MemoryNode.State.PROMOTED)
        MemoryLink.objects.bulk_create(
            [
                MemoryLink(source_id=s, target_id=t, kind=k, score=score, created_at=now)
                for s, t, k, score in result.links
            ],
            update_conflicts=True,
            unique_fields=["source", "target", "kind"],
            update_fields=["score"],
        )
        _record_promotion_events(result, owners)
    return result


def _supersede(replaced_by: dict[int, int], now: datetime) -> None:
    if not replaced_by:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE memory_memorynode AS t
               SET valid_to = %s, superseded_by_id = v.by
              FROM unnest(%s::bigint[], %s::bigint[]) AS v(id, by)
             WHERE t.id = v.id AND t.valid_to IS NULL
            """,
            [now, list(replaced_by), list(replaced_by.values())],
        )


def _record_promotion_events(result: PromotionResult, owners: dict[int, int | None]) -> None:
    from django.contrib.auth import get_user_model

    from apps.core.models import Event
    from apps.core.services import event_record

    users = get_user_model().objects.in_bulk({o for o in owners.values() if o is not None})
    for owner_id in sorted(set(owners.values()), key=lambda o: o or 0):
        owner = users.get(owner_id)
        promoted = [n for n in result.promoted if owners[n] == owner_id]
        merged = {n: t for n, t in result.merged.items() if owners[n] == owner_id}
        superseded = {old: new for old, new in result.superseded.items() if owners[new] == owner_id}
        links = [link for link in result.links if owners[link[0]] == owner_id]
        if promoted or merged:
            event_record(
                kind=Event.Kind.PROMOTION,
                summary=(
                    f"promoted {len(promoted)} memories to long-term, "
                    f"merged {len(merged)} near-duplicates, superseded {len(superseded)}"
                ),
                owner=owner,
                payload={
                    "promoted": promoted,
                    "merged": {str(n): t for n, t in merged.items()},
                    "superseded": {str(old): new for old, new in superseded.items()},
                },
            )
        if links:
            counts = {kind: sum(1 for link in links if link[2] == kind) for kind in MemoryLink.Kind}
            event_record(
                kind=Event.Kind.LINK,
                summary="linked memories: "
                + ", ".join(f"{count} {kind}" for kind, count in counts.items() if count),
                owner=owner,
                payload={
                    "links": [
                        {"source": s, "target": t, "kind": str(k), "score": round(score, 4)}
                        for s, t, k, score in links
                    ]
                },
            )


# What forgetting a set of nodes (`gone`, already deleted) also deletes, in the same statement:
# the earlier versions they superseded, their links and critiques, the events that name them
# (critique and edit events quote the text), retrieval plans (see `_PLANS_QUOTING`) and their
# entries in the memory traces of answers. Postgres checks the foreign keys at commit, so the
# order of the deletes does not matter.
_FORGET_CASCADE = """
history AS (
    DELETE FROM memory_memorynode
     WHERE superseded_by_id IN (SELECT id FROM gone) AND id NOT IN (SELECT id FROM gone)
 RETURNING id, owner_id, description, false AS current
),
forgotten AS (
    SELECT * FROM gone UNION ALL SELECT * FROM history
),
links AS (
    DELETE FROM memory_memorylink
     WHERE source_id IN (SELECT id FROM forgotten) OR target_id IN (SELECT id FROM forgotten)
 RETURNING 1
),
critiques AS (
    DELETE FROM memory_critique WHERE node_id IN (SELECT id FROM forgotten) RETURNING 1
),
events AS (
    DELETE FROM core_event
     WHERE (owner_id IN (SELECT owner_id FROM forgotten)
            OR (owner_id IS NULL AND EXISTS (SELECT 1 FROM forgotten WHERE owner_id IS NULL)))
       AND payload -> 'node_id' IN (SELECT to_jsonb(id) FROM forgotten)
 RETURNING 1
),
plans AS (
    DELETE FROM memory_retrievalplan AS p
     USING chat_conversation AS c
     WHERE c.id = p.conversation_id
       AND {plans}
 RETURNING 1
),
traces AS (
    UPDATE chat_message AS m
       SET trace = jsonb_set(
               m.trace, '{memory,memories}',
               (SELECT COALESCE(jsonb_agg(entry), '[]'::jsonb)
                  FROM jsonb_array_elements(m.trace -> 'memory' -> 'memories') AS entry
                 WHERE entry -> 'id' NOT IN (SELECT to_jsonb(id) FROM forgotten)))
      FROM chat_conversation AS c
     WHERE c.id = m.conversation_id
       AND c.owner_id IN (SELECT owner_id FROM forgotten)
       AND jsonb_typeof(m.trace -> 'memory' -> 'memories') = 'array'
       AND EXISTS (
           SELECT 1 FROM jsonb_array_elements(m.trace -> 'memory' -> 'memories') AS entry
            WHERE entry -> 'id' IN (SELECT to_jsonb(id) FROM forgotten)
       )
 RETURNING 1
)
SELECT owner_id,
       count(*) FILTER (WHERE current),
       count(*) FILTER (WHERE NOT current),
       (SELECT count(*) FROM critiques),
       (SELECT count(*) FROM links),
       (SELECT count(*) FROM events),
       (SELECT count(*) FROM plans),
       (SELECT count(*) FROM traces)
  FROM forgotten
 GROUP BY owner_id
"""

# Decay runs every hour: it drops only the plans that quote a forgotten memory whole. A person
# who forgets a memory drops every plan of theirs, since a plan's queries may paraphrase it (the
# next turn plans again from the message).
_PLANS_QUOTING = """EXISTS (
           SELECT 1 FROM forgotten AS f
            WHERE f.owner_id = c.owner_id
              AND strpos(lower(p.steps::text), lower(btrim(to_jsonb(f.description)::text, '"'))) > 0
       )"""
_PLANS_OF_OWNERS = "c.owner_id IN (SELECT owner_id FROM forgotten)"

# CLAM's decay: a volatile memory nothing confirmed (its confidence is not above the one it
# started with, or is below the minimum score) and that nobody used, restated or changed for the
# decay time is forgotten. Confirmed and promoted memories stay.
_DECAY_SQL = """
WITH gone AS (
    DELETE FROM memory_memorynode
     WHERE state = 'volatile' AND valid_to IS NULL
       AND (confidence_score <= start_confidence OR confidence_score < %(minimum_score)s)
       AND COALESCE(last_accessed_at, created_at) < now() - make_interval(hours => %(hours)s)
 RETURNING id, owner_id, description, true AS current
),
""" + _FORGET_CASCADE.replace("{plans}", _PLANS_QUOTING)

# A memory and its whole line of versions: the rows it superseded and the rows that superseded it.
_FORGET_SQL = """
WITH RECURSIVE family(id) AS (
    SELECT id FROM memory_memorynode WHERE id = ANY(%(ids)s)
    UNION
    SELECT relative.id
      FROM family
      JOIN memory_memorynode AS node ON node.id = family.id
      JOIN memory_memorynode AS relative
        ON relative.superseded_by_id = node.id OR relative.id = node.superseded_by_id
),
gone AS (
    DELETE FROM memory_memorynode WHERE id IN (SELECT id FROM family)
 RETURNING id, owner_id, description, valid_to IS NULL AS current
),
""" + _FORGET_CASCADE.replace("{plans}", _PLANS_OF_OWNERS)


@dataclass
class ForgetReceipt:
    """What one act of forgetting deleted, per kind of row."""

    memories: int = 0
    versions: int = 0
    critiques: int = 0
    links: int = 0
    episodes: int = 0
    triples: int = 0
    events: int = 0
    plans: int = 0
    traces: int = 0
    per_owner: dict[int | None, int] = field(default_factory=dict)

    _WORDS = {
        "memories": ("memory", "memories"),
        "versions": ("earlier version", "earlier versions"),
        "critiques": ("critique", "critiques"),
        "links": ("link", "links"),
        "episodes": ("episode", "episodes"),
        "triples": ("fact", "facts"),
        "events": ("event", "events"),
        "plans": ("retrieval plan", "retrieval plans"),
        "traces": ("answer's trace", "answers' traces"),
    }

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self._WORDS}

    @property
    def sentence(self) -> str:
        """ "Forgot 1 memory, 2 earlier versions, 3 critiques." — the memories always, the rest
        when there were any."""
        parts = [
            f"{count} {self._WORDS[name][count != 1]}"
            for name, count in self.as_dict().items()
            if count or name == "memories"
        ]
        return "Forgot " + ", ".join(parts) + "."


def _forget(sql: str, params: dict) -> ForgetReceipt:
    receipt = ForgetReceipt()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for owner_id, memories, versions, *totals in cursor.fetchall():
            receipt.per_owner[owner_id] = memories
            receipt.memories += memories
            receipt.versions += versions
            (
                receipt.critiques,
                receipt.links,
                receipt.events,
                receipt.plans,
                receipt.traces,
            ) = totals
    return receipt


def memories_forget(*, node_ids: list[int]) -> ForgetReceipt:
    """Forget memories with every trace of them, in one statement (see `_FORGET_CASCADE`)."""
    with transaction.atomic():
        return _forget(_FORGET_SQL, {"ids": list(node_ids)})


_FORGET_ALL_TRACES_SQL = """
WITH scrubbed AS (
    SELECT m.id,
           CASE WHEN jsonb_typeof(m.trace -> 'memory') = 'object'
                THEN jsonb_set(m.trace, '{memory}', (m.trace -> 'memory')
                     || '{"memories": [], "episodes": [], "triples": []}'::jsonb)
                ELSE m.trace
           END AS trace
      FROM chat_message AS m
      JOIN chat_conversation AS c ON c.id = m.conversation_id
     WHERE c.owner_id = %s
       AND (jsonb_typeof(m.trace -> 'memory') = 'object'
            OR jsonb_typeof(m.trace -> 'reflection') = 'object')
)
UPDATE chat_message AS m
   SET trace = CASE WHEN jsonb_typeof(s.trace -> 'reflection') = 'object'
                    THEN jsonb_set(s.trace, '{reflection,rejected}', '[]'::jsonb)
                    ELSE s.trace
               END
  FROM scrubbed AS s
 WHERE s.id = m.id
"""


def memories_forget_all(*, owner_id: int) -> ForgetReceipt:
    """Forget everything about one person: memories with all they cascade to, episodes,
    triples, the mind's events about them, their retrieval plans, their world state and what
    their answers' traces quote. Their conversations stay; global knowledge stays."""
    from apps.core.models import Event

    with transaction.atomic():
        node_ids = list(MemoryNode.objects.filter(owner_id=owner_id).values_list("id", flat=True))
        receipt = _forget(_FORGET_SQL, {"ids": node_ids})
        _, deleted = Episode.objects.filter(owner_id=owner_id).delete()
        receipt.episodes = deleted.get(Episode._meta.label, 0)
        _, deleted = Triple.objects.filter(owner_id=owner_id).delete()
        receipt.triples = deleted.get(Triple._meta.label, 0)
        receipt.events += Event.objects.filter(owner_id=owner_id).delete()[0]
        receipt.plans += RetrievalPlan.objects.filter(conversation__owner_id=owner_id).delete()[0]
        WorldState.objects.filter(owner_id=owner_id).delete()
        with connection.cursor() as cursor:
            cursor.execute(_FORGET_ALL_TRACES_SQL, [owner_id])
            receipt.traces = cursor.rowcount
    return receipt


def memories_decay(*, decay_hours: int, minimum_score: int) -> dict[int | None, int]:
    """Forget stale, unconfirmed volatile nodes in one statement; deletions per owner.

    The conditions live in the DELETE's own WHERE: a node that another transaction touches
    (last access, a critic's +1, a promotion) while this runs is re-checked by PostgreSQL
    after that transaction commits, and survives. What forgetting a node also deletes (its
    versions, links, critiques, the events and plans quoting it) goes in the same statement.
    """

    from apps.core.models import Event
    from apps.core.services import events_record

    with transaction.atomic():
        receipt = _forget(_DECAY_SQL, {"minimum_score": minimum_score, "hours": int(decay_hours)})
        events_record(
            [
                Event(
                    kind=Event.Kind.DECAY,
                    summary=f"forgot {count} stale, unconfirmed memories",
                    owner_id=owner_id,
                    payload={
                        "deleted": count,
                        "decay_hours": decay_hours,
                        "minimum_score": minimum_score,
                    },
                )
                for owner_id, count in receipt.per_owner.items()
            ]
        )
    return receipt.per_owner


def memories_expire() -> int:
    """Close the facts whose own time has run out (an exam that was yesterday): they stop
    being current, and stay as history of what was believed until then."""
    return MemoryNode.objects.filter(valid_to=None, valid_until__lte=timezone.now()).update(
        valid_to=models.F("valid_until")
    )


def memory_node_set_validity(*, node: MemoryNode, valid_until: datetime | None) -> MemoryNode:
    """Give a fact an end (or take it away); decay closes it once that time has passed."""
    MemoryNode.objects.filter(pk=node.pk, valid_to=None).update(valid_until=valid_until)
    node.refresh_from_db(fields=["valid_until", "valid_to"])
    return node


# --- the world state: what the talk is about now, changed only by validated operations ------

# A turn that proposes more than this is rambling; the rest are rejected, not guessed at.
MAX_WORLD_OPS = 20


@dataclass
class WorldChange:
    """What one `world_apply` did: the operations applied, those rejected with the reason.

    `changed` is whether the state differs afterwards (then `version` moved by one); `error`
    is set instead when no operations could be had at all (the LLM failed); `reason` is the
    proposer's own word for its operations.
    """

    state: WorldState
    version: int
    applied: list[dict] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)
    changed: bool = False
    error: str = ""
    reason: str = ""

    def as_dict(self) -> dict:
        """For a trace: JSON, without the model instance."""
        return {
            "applied": self.applied,
            "rejected": self.rejected,
            "changed": self.changed,
            "version": self.version,
            "error": self.error,
            "reason": self.reason,
        }


def _short(value, depth: int = 0):
    """A proposed operation as JSON small enough for an event or a trace, whatever it was."""
    if isinstance(value, str):
        return value[:300]
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, list | tuple) and depth < 2:
        return [_short(item, depth + 1) for item in value[:20]]
    if isinstance(value, dict) and depth < 2:
        return {str(key)[:50]: _short(item, depth + 1) for key, item in list(value.items())[:10]}
    return str(value)[:300]


def _op_json(op: WorldOp | dict) -> dict:
    if isinstance(op, WorldOp):
        return op.model_dump(exclude_none=True)
    return _short(op) if isinstance(op, dict) else {"op": _short(op)}


def _world_op_apply(state: WorldState, op: WorldOp) -> str:
    """Apply one valid operation to the locked row; the reason it cannot be, else ""."""
    if op.path not in WORLD_LIST_PATHS:
        if op.op == "set":
            state.project = op.value
        elif op.value and op.value.casefold() != state.project.casefold():
            return f"the active project is {state.project!r}, not {op.value!r}"
        else:
            state.project = ""
        return ""
    if op.op == "set":
        setattr(state, op.path, list(op.values))
        return ""
    items = list(getattr(state, op.path))
    found = [item for item in items if item.casefold() == op.value.casefold()]
    if op.op == "append":
        if found:
            return f"{op.value!r} is already in {op.path}"
        limit = WorldState.LIMITS[op.path]
        if len(items) >= limit:
            return f"{op.path} already holds {limit} items: remove one first"
        items.append(op.value)
    else:
        if not found:
            return f"{op.value!r} is not in {op.path}"
        items.remove(found[0])
    setattr(state, op.path, items)
    return ""


def world_apply(*, user_id: int, ops: Sequence[WorldOp | dict], source: str) -> WorldChange:
    """Apply the valid operations to a user's world state in one transaction.

    An invalid operation, or one the state does not allow (a full list, removing what is not
    there), is returned in `rejected` with a one-sentence reason, never raised; the others
    still apply. The row is locked while they do, created if missing; the version goes up once,
    and one event records what changed, when anything did. `source`: "turn", "reflection",
    "browser", "admin".
    """
    parsed: list[tuple[WorldOp | dict, WorldOp]] = []
    rejected: list[dict] = []
    for index, raw in enumerate(ops):
        result = world_op_parse(raw)
        if index >= MAX_WORLD_OPS:
            result = f"at most {MAX_WORLD_OPS} operations are applied at once"
        if isinstance(result, str):
            rejected.append({"op": _op_json(raw), "reason": result})
        else:
            parsed.append((raw, result))
    if not parsed:
        state = WorldState.objects.filter(owner_id=user_id).first() or WorldState(owner_id=user_id)
        return WorldChange(state=state, version=state.version, rejected=rejected)
    applied: list[dict] = []
    with transaction.atomic():
        WorldState.objects.bulk_create([WorldState(owner_id=user_id)], ignore_conflicts=True)
        state = WorldState.objects.select_for_update().get(owner_id=user_id)
        before = state.as_dict()
        for raw, op in parsed:
            reason = _world_op_apply(state, op)
            if reason:
                rejected.append({"op": _op_json(raw), "reason": reason})
            else:
                applied.append(_op_json(op))
        changed = state.as_dict() != before
        if changed:
            state.version += 1
            state.save()
            _record_world_change(state=state, source=source, applied=applied, rejected=rejected)
    return WorldChange(
        state=state, version=state.version, applied=applied, rejected=rejected, changed=changed
    )


def _record_world_change(
    *, state: WorldState, source: str, applied: list[dict], rejected: list[dict]
) -> None:
    from apps.core.models import Event
    from apps.core.services import events_record

    done = ", ".join(f"{op['op']} {op['path']}" for op in applied)
    events_record(
        [
            Event(
                kind=Event.Kind.EDIT,
                owner_id=state.owner_id,
                summary=f"world state v{state.version} by {source}: {done}",
                payload={
                    "action": "world",
                    "source": source,
                    "version": state.version,
                    "applied": applied,
                    "rejected": rejected,
                    "state": state.as_dict(),
                },
            )
        ]
    )
