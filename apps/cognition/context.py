"""The context builder's recall: what memory holds for one turn, read in parallel.

The user's message is embedded on one pool (HTTP only) while the turn is saved, then searched
on a second pool beside the plan and graph reads. Every read is a selector of the memory app;
this module only orders them in time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import NamedTuple

from django.db import connection

from apps.accounts.selectors import user_knowledge_language
from apps.chat.services import ChatError
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config
from apps.memory.embedding import Embedder, EmbeddingError, get_embedder
from apps.memory.episode_selectors import EpisodeHit, episode_search
from apps.memory.models import Triple
from apps.memory.router import Route, route_turn, triple_match
from apps.memory.schemas import PlanStep
from apps.memory.search_selectors import (
    EMBED_TIMEOUT_SECONDS,
    EPISODES_PER_TURN,
    MemoryHit,
    Weights,
    memory_search,
    memory_search_ranked,
    memory_text_match,
)
from apps.memory.selectors import default_plan_steps, plan_and_knowledge, turn_plan_steps

logger = logging.getLogger(__name__)


@dataclass
class MemoryContext:
    """What memory holds for a turn, best first; the answer fits it to the model's window."""

    trace: dict = field(default_factory=dict)
    knowledge: list[Triple] = field(default_factory=list)
    memories: list[MemoryHit] = field(default_factory=list)
    episodes: list[EpisodeHit] = field(default_factory=list)
    language: str = "en"
    user: object = None
    # What the caller's `meanwhile` read (memory_context_for_turn).
    meanwhile: object = None

    @property
    def prompt_block(self) -> str:
        """Everything, unbudgeted."""
        from apps.memory.renderer import render_memory_block

        return render_memory_block(
            knowledge=self.knowledge,
            memories=self.memories,
            episodes=self.episodes,
            language=self.language,
            user=self.user,
        )


def _embed_queries(embedder: Embedder, texts: list[str]) -> tuple[dict[str, list[float]], str]:
    """Vectors by text, and an error sentence instead when the embedder failed."""
    if not texts:
        return {}, ""
    try:
        vectors = embedder.embed(texts)
    except EmbeddingError as exc:
        return {}, str(exc)[:300]
    except Exception as exc:  # noqa: BLE001 — a turn must go on without vectors, whatever broke.
        logger.exception("embedding the turn's queries failed")
        return {}, f"{type(exc).__name__}: {exc}"[:300]
    return dict(zip(texts, vectors, strict=True)), ""


# While the calling thread reads the plan and the graph, a turn embeds its message on the first
# pool (HTTP only) and searches with it on the second, which runs the episode search beside it.
# The second pool's threads keep a database connection each, like request threads, recycled by
# age. Searches wait on embeddings, never the other way round, so neither pool can deadlock.
class RecallBusy(ChatError):
    """The recall's pool has all the work it may hold; the turn is refused, not queued."""


RECALL_BUSY = "Thalamus is busy with other messages right now. Try again in a moment."


class BoundedPool(ThreadPoolExecutor):
    """A thread pool that holds at most `max_workers + queue` tasks and refuses the next one
    with RecallBusy: under a flood, a turn is told at once instead of waiting in a backlog."""

    def __init__(self, max_workers: int, *, queue: int, thread_name_prefix: str):
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self.capacity = max_workers + queue
        self._slots = threading.BoundedSemaphore(self.capacity)

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if not self._slots.acquire(blocking=False):
            raise RecallBusy(RECALL_BUSY)
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(lambda _: self._slots.release())
        return future


_EMBED_POOL = BoundedPool(4, queue=12, thread_name_prefix="thalamus-embed")
_SEARCH_POOL = BoundedPool(8, queue=24, thread_name_prefix="thalamus-recall")


def _done(value) -> Future:
    future = Future()
    future.set_result(value)
    return future


def _submit_or_none(pool: BoundedPool, /, *args, **kwargs) -> Future | None:
    """The call on a pool thread, or None when the pool is full and the caller makes it."""
    try:
        return pool.submit(*args, **kwargs)
    except RecallBusy:
        return None


def start_turn_embedding(*, text: str, config: RuntimeConfig) -> Future:
    """Start embedding the user's message on the embedding pool, for `memory_context_for_turn`.

    It only submits, so an event loop can call it the moment a message arrives: the embedding
    is the longest wait before the answer can be asked for, and starts before the thread hop
    into the turn's preparation and the configuration read there. Raises RecallBusy when the
    pool is full.
    """
    return _EMBED_POOL.submit(_embed_turn_text, text, config)


def _embed_turn_text(text: str, config: RuntimeConfig) -> tuple[dict[str, list[float]], str]:
    embedder = get_embedder(timeout=EMBED_TIMEOUT_SECONDS, config=config)
    return _embed_queries(embedder, [_own_step(text, config.max_memory_results).search_text])


def turn_search_start(*, user_id: int, text: str, config: RuntimeConfig) -> OwnSearch:
    """Embed the user's message and search with it on the pools from the moment it arrives,
    before anything else of the turn is read: it only submits, so an event loop can call it.
    Raises RecallBusy when the embedding pool is full."""
    return own_search_start(
        user_id=user_id,
        text=text,
        config=config,
        embedded=start_turn_embedding(text=text, config=config),
    )


class OwnSearch(NamedTuple):
    """The search of the user's own message under way: its embedding, and the search that
    waits on it on a pool thread (None when that pool is full: the turn's thread searches)."""

    embedded: Future
    search: Future | None


def own_search_start(
    *, user_id: int, text: str, config: RuntimeConfig, embedded: Future | None = None
) -> OwnSearch:
    """Embed the user's own message (unless `embedded` is the embedding under way) and search
    with it on pool threads: every turn searches it whatever the plan says, so it can start
    before the turn's other reads, which it then runs beside."""
    if embedded is None:
        try:
            embedded = start_turn_embedding(text=text, config=config)
        except RecallBusy:  # a turn already admitted runs on; its thread does the work
            embedded = _done(_embed_turn_text(text, config))
    search = _submit_or_none(
        _SEARCH_POOL,
        _in_pool,
        _search_when_embedded,
        embedded=embedded,
        step=_own_step(text, config.max_memory_results),
        user_id=user_id,
        weights=Weights.from_config(config),
    )
    return OwnSearch(embedded, search)


def read_on_pool(pool: BoundedPool, function, /, **kwargs) -> Future | None:
    """`function` (database reads) on one of `pool`'s threads, whose connection is released
    after it if too old; None when the pool is full and the caller makes the call."""
    return _submit_or_none(pool, _in_pool, function, **kwargs)


def _own_step(text: str, limit: int) -> PlanStep:
    """The search for the user's own message, which every turn runs whatever the plan says."""
    return default_plan_steps(text, limit)[0]


def _in_pool(function, /, **kwargs):
    """Run a database read on a pool thread, then release its connection if it is too old."""
    try:
        return function(**kwargs)
    finally:
        connection.close_if_unusable_or_obsolete()


def _search_when_embedded(
    *, embedded: Future, step: PlanStep, user_id: int, weights: Weights
) -> list[MemoryHit]:
    """The search of `step`: its words matched while the message is embedded, so that only the
    vectors' half waits for the embedding (for a user with many memories whose words are
    common, the words' half is the longer one)."""
    match = memory_text_match(
        user_id=user_id,
        text=step.search_text,
        limit=step.limit,
        kinds=step.types,
        weights=weights,
    )
    vectors, _ = embedded.result()
    return memory_search_ranked(match, vector=vectors.get(step.search_text))


def memory_context_for_turn(
    *,
    user,
    conversation,
    text: str,
    config: RuntimeConfig | None = None,
    embedded: Future | None = None,
    language: str | None = None,
    meanwhile: Callable[[], object] | None = None,
    own: OwnSearch | None = None,
) -> MemoryContext:
    """Everything memory adds to the system prompt of one turn, with a trace of why.

    Synchronous (ORM and one HTTP embedding call): from a consumer call it through
    `sync_to_async` / `database_sync_to_async`, outside any transaction, as its searches run
    on pool threads with connections of their own. Never raises on an LLM or embedding failure: the
    turn then gets full-text retrieval, and the trace says so. The caller marks the memories
    it used as accessed (`mark_memories_used`) once the answer no longer waits on it.
    `embedded` is the embedding of `text` already under way (`start_turn_embedding`);
    `language`, the user's knowledge language when the caller has read it; `meanwhile`, a read
    of the caller's to make while the message is embedded (its result: `MemoryContext.meanwhile`);
    `own`, the search of the message the caller started (`own_search_start`).
    """
    started = time.perf_counter()
    timings: dict[str, float] = {}
    trace: dict = {}

    def lap(step: str, since: float) -> float:
        now = time.perf_counter()
        timings[step] = round((now - since) * 1000, 2)
        return now

    config = config or runtime_config()
    limit = config.max_memory_results
    weights = Weights.from_config(config)
    embedder = get_embedder(timeout=EMBED_TIMEOUT_SECONDS, config=config)
    own_step = _own_step(text, limit)
    own_query = own_step.search_text
    # The user's own message is always searched: it is embedded and searched on pool threads
    # while this one reads the plan and the graph. The pool threads have their own connections:
    # the turn is read after the message was committed, never inside a transaction.
    if own is None:
        own = own_search_start(user_id=user.pk, text=text, config=config, embedded=embedded)
    embedded, own_search = own
    mark = time.perf_counter()
    stored_steps, triples = plan_and_knowledge(
        user_id=user.pk, conversation_id=conversation.pk if conversation else None
    )
    steps, plan_source = turn_plan_steps(
        stored_steps,
        text=text,
        limit=limit,
        conversation_id=conversation.pk if conversation else None,
    )
    mark = lap("plan_and_graph", mark)
    earlier = meanwhile() if meanwhile is not None else None

    own_vectors, error = embedded.result()
    vectors = dict(own_vectors)  # the search thread reads its own copy
    own_vector = vectors.get(own_query)
    mark = lap("embed", mark)
    # Episodes are searched beside the memories, but waited for only if the router asks for
    # them: a familiar turn never waits on them.
    early_episodes = _submit_or_none(
        _SEARCH_POOL,
        _in_pool,
        episode_search,
        user_id=user.pk,
        text=text,
        vector=own_vector,
        limit=EPISODES_PER_TURN,
        weights=weights,
    )

    planned = [step for step in steps[1:] if step.search_text != own_query]
    found: list[MemoryHit] = []
    if planned:
        planned_vectors, planned_error = _embed_queries(
            embedder, list(dict.fromkeys(step.search_text for step in planned))
        )
        vectors.update(planned_vectors)
        error = error or planned_error
        for step in planned:
            found += memory_search(
                user_id=user.pk,
                text=step.search_text,
                vector=planned_vectors.get(step.search_text),
                limit=step.limit,
                kinds=step.types,
                weights=weights,
            )
        mark = lap("plan_steps", mark)
    if error:
        trace["embedding_error"] = error

    if own_search is not None:
        own_hits = own_search.result()
    else:
        own_hits = _search_when_embedded(
            embedded=embedded, step=own_step, user_id=user.pk, weights=weights
        )
    found += own_hits
    mark = lap("memories", mark)

    hits: dict[int, MemoryHit] = {}
    for hit in found:
        if hit.id not in hits or hits[hit.id].score < hit.score:
            hits[hit.id] = hit
    memories = sorted(hits.values(), key=lambda hit: hit.score, reverse=True)[:limit]

    # Familiarity is the message's own raw cosine with a memory, not a fused, normalised score.
    route = route_turn(
        text=text,
        best_memory_cosine=max((hit.components["vector"] for hit in own_hits), default=0.0)
        if own_vector is not None
        else None,
        best_triple_match=triple_match(
            text=text, triples=[(triple.subject, triple.object) for triple in triples]
        ),
    )
    episodes: list[EpisodeHit] = []
    if route.name == Route.RECOLLECTION:
        if early_episodes is not None:
            episodes = early_episodes.result()
        else:
            episodes = episode_search(
                user_id=user.pk,
                text=text,
                vector=own_vector,
                limit=EPISODES_PER_TURN,
                weights=weights,
            )
        mark = lap("episodes", mark)

    language = language or user_knowledge_language(user=user, config=config)
    timings["total"] = round((time.perf_counter() - started) * 1000, 2)

    trace.update(
        {
            "route": str(route.name),
            "reason": route.reason,
            "plan": {
                "source": plan_source,
                "steps": [step.model_dump(mode="json") for step in steps],
            },
            "vector_search": bool(vectors),
            "memories": [hit.as_trace() for hit in memories],
            "episodes": [hit.as_trace() for hit in episodes],
            "triples": [
                {"id": triple.id, "category": triple.category, "global": triple.owner_id is None}
                for triple in triples
            ],
            "timings_ms": timings,
        }
    )
    return MemoryContext(
        trace=trace,
        knowledge=triples,
        memories=memories,
        episodes=episodes,
        language=language,
        user=user,
        meanwhile=earlier,
    )


def mark_memories_used(trace: dict) -> None:
    """Mark the memories a turn put into its prompt as accessed: one task, one UPDATE."""
    from apps.memory.tasks import mark_accessed

    ids = [item["id"] for item in trace.get("memories", []) if "id" in item]
    if ids:
        mark_accessed.delay_on_commit(ids)
