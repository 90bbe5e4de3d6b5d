"""Consolidation (CLAM): confident short-term memories become long-term, near-duplicates merge
into the older node, and the rest are linked to what they resemble, support or contradict."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import connection, models, transaction
from django.utils import timezone

from apps.core.models import Event
from apps.core.services import event_record
from apps.memory.models import Critique, MemoryLink, MemoryNode

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

        # The user's own words are replaced only by their later words: an inference the critic
        # found contradicting them is linked as contradicting, and they stay (issue 37 item 7).
        said = set(
            MemoryNode.objects.filter(
                id__in={*neighbours, *(n for near in neighbours.values() for n, _, _ in near)},
                source=MemoryNode.Source.USER,
            ).values_list("id", flat=True)
        )
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
                    replaceable = n not in said or candidate in said
                    if near_is_older and replaceable and n not in result.superseded:
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


_LINK_WORDS = {
    MemoryLink.Kind.SIMILAR: ("pair alike", "pairs alike"),
    MemoryLink.Kind.SUPPORTS: ("pair that agrees", "pairs that agree"),
    MemoryLink.Kind.CONTRADICTS: ("pair that disagrees", "pairs that disagree"),
}


def _memories(count: int) -> str:
    return f"{count} memor{'y' if count == 1 else 'ies'}"


def _consolidation_sentence(promoted: int, merged: int, superseded: int) -> str:
    """ "Kept 2 memories for the long term, confirmed often enough; merged 1 near-duplicate." """
    done = []
    if promoted:
        done.append(f"kept {_memories(promoted)} for the long term, confirmed often enough")
    if merged:
        done.append(f"merged {merged} near-duplicate{'s' if merged != 1 else ''}")
    if superseded:
        done.append(f"replaced {superseded} older version{'s' if superseded != 1 else ''}")
    sentence = "; ".join(done)
    return sentence[0].upper() + sentence[1:] + "."


def _record_promotion_events(result: PromotionResult, owners: dict[int, int | None]) -> None:
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
                summary=_consolidation_sentence(len(promoted), len(merged), len(superseded)),
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
                summary="Connected memories that belong together: "
                + ", ".join(
                    f"{count} {_LINK_WORDS[kind][count != 1]}"
                    for kind, count in counts.items()
                    if count
                )
                + ".",
                owner=owner,
                payload={
                    "links": [
                        {"source": s, "target": t, "kind": str(k), "score": round(score, 4)}
                        for s, t, k, score in links
                    ]
                },
            )
