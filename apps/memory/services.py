"""Memories written one at a time: nodes and their versions, restated or held for approval,
revised and expired; links and retrieval plans.

Episodes, the knowledge graph, the critic's verdicts, consolidation, forgetting, the world
state and the filling in of vectors are in their own `*_services` modules.
"""

from __future__ import annotations

import re
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, models, transaction
from django.db.models import F
from django.db.models.functions import Abs, Length
from django.utils import timezone
from pgvector.django import CosineDistance

from apps.chat.models import Conversation, Message
from apps.core.selectors import runtime_config
from apps.language.text import visible
from apps.memory.embedding import get_embedder
from apps.memory.embedding_services import embedding_try, embeddings_fill_later
from apps.memory.models import EmbeddingStatus, MemoryLink, MemoryNode, RetrievalPlan
from apps.memory.quarantine import looks_like_instruction
from apps.memory.schemas import RetrievalPlanSchema, normal_text, same_text
from apps.memory.support import quote_supports


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
    source: str,
    quote: str = "",
    embed: bool = True,
    vector: list[float] | None = None,
) -> MemoryNode:
    """Store a memory; a fact whose key already has a current value evolves that value, and one
    the owner's current memories already say (the same value of its key, or says_the_same)
    confirms that memory instead of adding a row (memory_node_restate: `restated` is set on it).

    `vector`, when the caller already embedded "topic: description", saves embedding it again.
    `source` is required: who wrote the memory decides what the gate does with it, so no door
    may get a person's trust (ADMIN) by leaving it out.

    The gate before every prompt (apps.memory.quarantine): a description or quote that reads
    as an instruction is stored quarantined, without a fact key, whatever state was asked for,
    unless a person wrote it by hand (ADMIN: the admin, the memory browser, a seed).
    An imported memory never has a fact key: a file is not the user's word, and must not
    replace the name or the city the user stated.
    A memory said to be the user's own whose description adds words to its quote is stored as
    inferred, at confidence 0 (apps.memory.support).

    The current row keeps its id (links and traces still point at it); its previous value is
    copied into a superseded row. Without a vector (embedder down, or `embed=False`) the node is
    saved pending and a task embeds it after commit. A caller inside a transaction makes the
    vector first (`memory_vector`) and passes it with `embed=False`: nothing is embedded while
    a transaction, or the owner's write lock, is held.
    """
    # Whatever door it came by, without what no reader sees (apps.language.text).
    description, quote = visible(description).strip(), visible(quote)
    if _held(description=description, quote=quote, source=source):
        state, fact_key = MemoryNode.State.QUARANTINED, ""
    if source == MemoryNode.Source.IMPORTED:
        fact_key = ""
    said = source == MemoryNode.Source.USER
    if said and not quote_supports(description=description, quote=quote):
        source, confidence_score = MemoryNode.Source.INFERRED, 0
    vector, marker = _vector_and_marker(
        MemoryNode(topic=topic, description=description).embedding_text, vector, embed=embed
    )
    now = timezone.now()
    status = EmbeddingStatus.READY if vector is not None else EmbeddingStatus.PENDING
    embedding_fields = {"embedding": vector, "embedding_model": marker, "embedding_status": status}
    with transaction.atomic():
        _lock_owner_writes(owner)
        current = None
        if fact_key:
            current = (
                MemoryNode.objects.select_for_update()
                .filter(owner=owner, fact_key=fact_key, valid_to=None)
                .first()
            )
        if current is not None and same_text(current.description, description):
            return memory_node_restate(node=current, source_message=source_message)
        if current is None:
            said_before = memory_node_said_before(
                owner=owner,
                description=description,
                vector=vector,
                quarantined=state == MemoryNode.State.QUARANTINED,
            )
            if said_before is not None:
                return memory_node_restate(node=said_before, source_message=source_message)
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
            embeddings_fill_later()
    return node


def _held(*, description: str, quote: str, source: str) -> bool:
    """Does the gate hold this text? A person writing by hand (the admin, a seed: ADMIN) is
    the approval; every other door is gated."""
    if source == MemoryNode.Source.ADMIN:
        return False
    return looks_like_instruction(description) or looks_like_instruction(quote)


def memory_vector(*, description: str, topic: str = "") -> list[float] | None:
    """The vector `memory_node_create` would make for this memory, or None when the embedder is
    down: made before a transaction opens, then passed in (`vector=…, embed=False`)."""
    text = MemoryNode(topic=topic, description=description.strip()).embedding_text
    return embedding_try(text=text)[0]


def _vector_and_marker(
    text: str, vector: list[float] | None, *, embed: bool
) -> tuple[list[float] | None, str]:
    """The caller's vector with the embedder's marker, else one made now unless `embed` is
    False (then the row is saved pending and filled after commit)."""
    if vector is not None:
        return vector, get_embedder().marker
    return embedding_try(text=text) if embed else (None, "")


# Words that change nothing a memory says: "The user likes hiking" is "User likes hiking".
_FILLER_WORDS = frozenset({"a", "an", "the", "s", "is", "are", "am", "was", "were"})


def _said_words(text: str) -> list[str]:
    return [w for w in re.findall(r"\w+", text.casefold()) if w not in _FILLER_WORDS]


def says_the_same(a: str, b: str, *, similarity: float | None = None) -> bool:
    """Two memories that say one thing: the same words in the same order, leaving out articles,
    "is" and the like, punctuation and case; or, with vectors `similarity` apart at least the
    configured duplicate similarity, the same words in any order ("Max is the user's dog" and
    "The user's dog is Max").

    Vectors alone cannot decide: all-MiniLM-L6-v2 puts "went to the support group on 7 May
    2023" and "... on 8 May 2023" at 0.992, "has two kids" and "has three kids" at 0.911
    (bench/README.md, issue #29 item 5).
    """
    words_a, words_b = _said_words(a), _said_words(b)
    if not words_a:
        return normal_text(a) == normal_text(b)
    if words_a == words_b:
        return True
    near = similarity is not None and similarity >= runtime_config().duplicate_similarity
    return near and sorted(words_a) == sorted(words_b)


def _lock_owner_writes(owner: AbstractBaseUser | None) -> None:
    """One memory write at a time per owner, until the transaction ends: two workers writing
    the same fact at once would each find no copy and both insert it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext('thalamus.memory_write'), %s)",
            [owner.pk if owner is not None else 0],
        )


def memory_writes_lock(*, owner: AbstractBaseUser | None) -> None:
    """Take the owner's memory-write lock now, until the transaction ends: a writer that locks
    other rows before writing memories (a chat message) takes it first, so that every writer
    takes the two in one order and none waits on another forever."""
    _lock_owner_writes(owner)


def memory_node_said_before(
    *,
    owner: AbstractBaseUser | None,
    description: str,
    vector: list[float] | None = None,
    quarantined: bool = False,
) -> MemoryNode | None:
    """The owner's current memory that already says `description` (says_the_same), if any.

    Candidates: the memories holding every one of its words, then, with a vector, the nearest
    ones. A held text (quarantined) is compared with held texts only, an ordinary one with the
    rest.
    """
    current = MemoryNode.objects.filter(owner=owner, valid_to=None)
    held = MemoryNode.State.QUARANTINED
    current = current.filter(state=held) if quarantined else current.exclude(state=held)
    holding = current
    for word in set(_said_words(description)) or {description}:
        holding = holding.filter(description__icontains=word)
    # Those of about its length first: one holding every word and more says more.
    apart = Abs(Length("description") - len(description))
    for node in holding.annotate(apart=apart).order_by("apart", "-id")[:50]:
        if says_the_same(node.description, description):
            return node
    if vector is None or quarantined or owner is None:
        return None
    for node, similarity in memory_nodes_near(owner_id=owner.pk, vector=vector, limit=3):
        if says_the_same(node.description, description, similarity=similarity):
            return node
    return None


def memory_node_restate(*, node: MemoryNode, source_message: Message | None = None) -> MemoryNode:
    """A memory said again confirms it, as the critic's win does: one more point of confidence
    and a fresh last use. Said again by the message that first said it (a reply repeating a
    sentence), it is left as it is. The returned node has `restated` set."""
    if source_message is None or node.source_message_id != source_message.pk:
        MemoryNode.objects.filter(pk=node.pk).update(
            confidence_score=F("confidence_score") + 1, last_accessed_at=timezone.now()
        )
        node.refresh_from_db(fields=["confidence_score", "last_accessed_at"])
    node.restated = True
    return node


def memory_hold(
    *,
    owner: AbstractBaseUser,
    text: str,
    held_from: str,
    source: str = MemoryNode.Source.INFERRED,
    source_message: Message | None = None,
) -> MemoryNode:
    """Keep an instruction-like text that came by a door other than a memory (a world-state
    operation, a triple, an episode's summary) as a quarantined memory, once per text.

    The memory browser's approval section shows it; approving it makes it an ordinary memory,
    recalled like any other. The write it came from is not replayed: it stays undone. It is
    embedded after commit: its callers hold a transaction (a reflection, an import), and a held
    memory is recalled only once approved.
    """
    text = " ".join(text.split())
    held = MemoryNode.objects.filter(
        owner=owner, state=MemoryNode.State.QUARANTINED, valid_to=None, description__iexact=text
    ).first()
    if held is not None:
        return held
    return memory_node_create(
        owner=owner,
        description=text,
        topic=f"held {held_from}"[:200],
        origin_context=(
            f"It came as a {held_from} and reads as an instruction to the assistant. Approved, "
            f"it is kept as a memory; the {held_from} itself stays as it was."
        ),
        state=MemoryNode.State.QUARANTINED,
        source=source,
        source_message=source_message,
        embed=False,
    )


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


def memory_nodes_mark_accessed(*, node_ids: list[int]) -> int:
    if not node_ids:
        return 0
    return MemoryNode.objects.filter(id__in=node_ids).update(last_accessed_at=timezone.now())


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


# --- the CLAM cycle: revise (doubt, consolidate and forget have their own modules) ----------------


def memory_nodes_near(
    *,
    owner_id: int,
    vector: list[float],
    limit: int,
    state: str | None = None,
    exclude_ids: list[int] | tuple[int, ...] = (),
) -> list[tuple[MemoryNode, float]]:
    """The owner's current nodes closest to a vector, with their cosine similarity."""
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
    vector: list[float] | None = None,
    embed: bool = True,
) -> MemoryNode:
    """Give a node a new value, keeping the old one as a superseded row (as fact keys do).

    The new value's `source` and `quote` replace the old ones; without a source, both stay.
    `vector` and `embed` as for `memory_node_create`: inside a transaction, pass the vector
    made before it (`memory_vector` with the node's topic) and `embed=False`.

    The same gate as `memory_node_create`: a new text that reads as an instruction never
    replaces the node's value; it is stored apart, quarantined, and the node stays as it was.
    """
    held = _held(description=description.strip(), quote=quote, source=source or node.source)
    if node.fact_key or held:
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
            vector=vector,
            embed=embed,
        )
    description = visible(description).strip()
    vector, marker = _vector_and_marker(
        MemoryNode(topic=node.topic, description=description).embedding_text, vector, embed=embed
    )
    with transaction.atomic():
        current = MemoryNode.objects.select_for_update().get(pk=node.pk)
        if same_text(current.description, description):
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
            embeddings_fill_later()
    return current


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
