"""Retrieval quality on LoCoMo: evidence recall@k of hybrid, plain vector and full-text search.

Each conversation's turns become one throwaway user's memories, dated by their session (made and
valid from then, so a question naming a date finds what was said on it); every
question (adversarial category 5 left out) is asked of that user only, and a question's recall@k is
the share of its evidence turns found among the top k (LoCoMo's definition).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from apps.memory.embedding import Embedder
from apps.memory.models import EmbeddingStatus, MemoryNode
from apps.memory.router import FAMILIAR_COSINE, Route, recall_cue, route_turn
from apps.memory.search_selectors import Weights, memory_search

CUTOFFS = (5, 10, 20)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_EVIDENCE_RE = re.compile(r"D:?(\d+):0*(\d+)")
_SESSION_KEY_RE = re.compile(r"session_(\d+)")
EMBED_BATCH = 256
TURN_SECONDS = 30


@dataclass
class Turn:
    dia_id: str
    description: str
    said_at: datetime


@dataclass
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]


@dataclass
class Dataset:
    conversations: list[Conversation]
    skipped_questions: int = 0
    repaired_evidence: int = 0


def parse_session_date(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023"."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_description(*, speaker: str, text: str, caption: str, date: datetime) -> str:
    shared = f" [shares a photo: {caption}]" if caption else ""
    return f"({date.day} {date:%B %Y}) {speaker}: {text}{shared}"


def _evidence_ids(raw: list[str], known: set[str]) -> tuple[frozenset[str], int]:
    """Well-formed ids that name a turn of the conversation, and how many needed repair."""
    found, repaired = set(), 0
    for item in raw:
        for session, turn in _EVIDENCE_RE.findall(str(item)):
            dia_id = f"D{session}:{turn}"
            if dia_id in known:
                found.add(dia_id)
                repaired += dia_id != item
    return frozenset(found), repaired


def load_locomo(path: Path) -> Dataset:
    samples = json.loads(Path(path).read_text())
    dataset = Dataset(conversations=[])
    for sample in samples:
        conversation = sample["conversation"]
        turns = []
        sessions = sorted(
            int(match.group(1))
            for key in conversation
            if (match := _SESSION_KEY_RE.fullmatch(key)) and conversation[key]
        )
        for number in sessions:
            date = parse_session_date(conversation[f"session_{number}_date_time"])
            for position, turn in enumerate(conversation[f"session_{number}"]):
                description = turn_description(
                    speaker=turn["speaker"],
                    text=turn["text"],
                    caption=turn.get("blip_caption", ""),
                    date=date,
                )
                # LoCoMo dates sessions, not turns: half a minute a turn, in order.
                said_at = date + timedelta(seconds=TURN_SECONDS * position)
                turns.append(Turn(turn["dia_id"], description, said_at))
        known = {turn.dia_id for turn in turns}
        questions = []
        for qa in sample["qa"]:
            if qa["category"] not in CATEGORIES:
                continue
            evidence, repaired = _evidence_ids(qa.get("evidence", []), known)
            dataset.repaired_evidence += repaired
            if not evidence:
                dataset.skipped_questions += 1
                continue
            questions.append(Question(qa["question"], evidence, qa["category"]))
        dataset.conversations.append(Conversation(sample["sample_id"], turns, questions))
    return dataset


@contextmanager
def throwaway_database(*, dim: int) -> Iterator[str]:
    """Point the default connection at a fresh database of its own, dropped afterwards.

    The evaluation's users and memories never touch the real ones, and the embedding column
    takes the evaluated embedder's dimension whatever THALAMUS_EMBED_DIM says.
    """
    original = connection.settings_dict["NAME"]
    name = f"{original}_eval_retrieval"[:63]
    _switch_database(None)
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cursor.execute(f'CREATE DATABASE "{name}"')
    _switch_database(name)
    try:
        call_command("migrate", verbosity=0, interactive=False)
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX memnode_embedding_hnsw")
            cursor.execute(
                f"ALTER TABLE memory_memorynode ALTER COLUMN embedding TYPE vector({dim})"
            )
            cursor.execute(
                "CREATE INDEX memnode_embedding_hnsw ON memory_memorynode "
                "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
            )
        yield name
    finally:
        _switch_database(original)
        with connection._nodb_cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _switch_database(name: str | None) -> None:
    connection.close()
    connection.close_pool()
    if name is not None:
        connection.settings_dict["NAME"] = name


class VectorCache:
    """Vectors kept between runs in a JSON file, keyed by the embedder's marker and the text.

    The embedding is most of a run's time; with the cache many weightings can be tried.
    """

    def __init__(self, path: Path | None):
        self.path = path
        self.vectors: dict[str, list[float]] = {}
        self.dirty = False
        if path is not None and path.is_file():
            self.vectors = json.loads(path.read_text())

    @staticmethod
    def key(marker: str, text: str) -> str:
        return hashlib.sha256(f"{marker}\0{text}".encode()).hexdigest()

    def save(self) -> None:
        if self.path is not None and self.dirty:
            self.path.write_text(json.dumps(self.vectors))
            self.dirty = False


def _embed_all(
    embedder: Embedder,
    texts: list[str],
    progress: Callable[[str], None],
    cache: VectorCache | None = None,
) -> list:
    cache = cache or VectorCache(None)
    keys = [cache.key(embedder.marker, text) for text in texts]
    missing = [
        (key, text) for key, text in zip(keys, texts, strict=True) if key not in cache.vectors
    ]
    for start in range(0, len(missing), EMBED_BATCH):
        batch = missing[start : start + EMBED_BATCH]
        for (key, _), vector in zip(batch, embedder.embed([t for _, t in batch]), strict=True):
            cache.vectors[key] = [float(x) for x in vector]
            cache.dirty = True
        progress(f"embedded {min(start + EMBED_BATCH, len(missing))}/{len(missing)}")
    return [cache.vectors[key] for key in keys]


def store_conversation(*, conversation: Conversation, vectors: list, marker: str) -> tuple:
    """One user per conversation; returns the user and a map from memory id to dia_id."""
    user = get_user_model().objects.create_user(f"locomo-{conversation.sample_id}", password=None)
    nodes = MemoryNode.objects.bulk_create(
        MemoryNode(
            owner=user,
            description=turn.description,
            state=MemoryNode.State.PROMOTED,
            embedding=vector,
            embedding_status=EmbeddingStatus.READY,
            embedding_model=marker,
            created_at=turn.said_at,
            valid_from=turn.said_at,
        )
        for turn, vector in zip(conversation.turns, vectors, strict=True)
    )
    return user, {
        node.pk: turn.dia_id for node, turn in zip(nodes, conversation.turns, strict=True)
    }


RETRIEVERS: dict[str, Callable[[Weights], Weights]] = {
    "hybrid": lambda configured: configured,
    "vector": lambda _: Weights(vector=1.0, text=0.0, recency=0.0, importance=0.0, confidence=0.0),
    "fulltext": lambda _: Weights(
        vector=0.0, text=1.0, recency=0.0, importance=0.0, confidence=0.0
    ),
}


@dataclass
class Scores:
    by_category: dict[str, dict[int, list[float]]] = field(default_factory=dict)

    def add(self, category: int, recalls: dict[int, float]) -> None:
        for cutoff, value in recalls.items():
            self.by_category.setdefault(CATEGORIES[category], {}).setdefault(cutoff, []).append(
                value
            )

    def summary(self) -> dict[str, dict[str, float]]:
        result = {"overall": {}}
        for cutoff in CUTOFFS:
            values = [v for cutoffs in self.by_category.values() for v in cutoffs[cutoff]]
            result["overall"][f"recall@{cutoff}"] = round(statistics.mean(values), 4)
        for name in CATEGORIES.values():
            if name in self.by_category:
                result[name] = {
                    f"recall@{cutoff}": round(statistics.mean(self.by_category[name][cutoff]), 4)
                    for cutoff in CUTOFFS
                }
                result[name]["questions"] = len(self.by_category[name][CUTOFFS[0]])
        result["overall"]["questions"] = sum(
            len(cutoffs[CUTOFFS[0]]) for cutoffs in self.by_category.values()
        )
        return result


@dataclass
class Routing:
    """Where the router sends each question: the fast track or recollection.

    LoCoMo users have no triples, so only recall cues and the raw memory cosine decide here.
    """

    # (category, route, best raw cosine of the hybrid candidates, has a recall cue) per question.
    samples: list[tuple[int, Route, float, bool]] = field(default_factory=list)

    def add(self, *, category: int, text: str, best_cosine: float) -> None:
        route = route_turn(text=text, best_memory_cosine=best_cosine).name
        self.samples.append((category, route, best_cosine, recall_cue(text) is not None))

    def summary(self) -> dict:
        result: dict = {"familiar_cosine": FAMILIAR_COSINE}
        for category, name in CATEGORIES.items():
            mine = [sample for sample in self.samples if sample[0] == category]
            if mine:
                routes = [route for _, route, _, _ in mine]
                result[name] = {
                    "recollection": round(routes.count(Route.RECOLLECTION) / len(mine), 4),
                    "familiarity": round(routes.count(Route.FAMILIARITY) / len(mine), 4),
                    "by_cue": round(sum(cue for *_, cue in mine) / len(mine), 4),
                    "questions": len(mine),
                }
        result["calibrated_cosine"] = self.calibrated_cosine()
        result["balanced_accuracy"] = {
            f"{step / 20:.2f}": round(self.balanced_accuracy(step / 20), 4) for step in range(21)
        }
        return result

    def balanced_accuracy(self, threshold: float) -> float:
        """Mean of the shares routed as they should be at this cosine threshold.

        Single-hop questions should take the fast track, multi-hop and temporal ones
        recollection; a question with a recall cue goes to recollection whatever its cosine.
        """
        fast = [(cosine, cue) for c, _, cosine, cue in self.samples if c == 4]
        deep = [(cosine, cue) for c, _, cosine, cue in self.samples if c in (1, 2)]
        if not fast or not deep:
            return 0.0
        fast_ok = sum(not cue and cosine >= threshold for cosine, cue in fast) / len(fast)
        deep_ok = sum(cue or cosine < threshold for cosine, cue in deep) / len(deep)
        return (fast_ok + deep_ok) / 2

    def calibrated_cosine(self) -> float:
        """The cosine threshold, to two decimals, with the best balanced accuracy here."""
        return max((step / 100 for step in range(101)), key=self.balanced_accuracy)


def evaluate(
    *,
    dataset: Dataset,
    embedder: Embedder,
    progress: Callable[[str], None] = lambda _: None,
    variants: dict[str, Weights] | None = None,
    cache: VectorCache | None = None,
) -> dict:
    """Load, ask and score; call inside `throwaway_database`.

    `variants` are further hybrid weightings asked of the same stored memories; each question's
    recall per retriever is kept in `result["records"]` for `folds`.
    """
    configured = Weights.from_config()
    retrievers = dict(RETRIEVERS)
    for name, weights in (variants or {}).items():
        retrievers[name] = lambda _, weights=weights: weights
    scores = {name: Scores() for name in retrievers}
    records: list[dict] = []
    routing = Routing()
    for conversation in dataset.conversations:
        progress(f"{conversation.sample_id}: {len(conversation.turns)} turns")
        turn_vectors = _embed_all(
            embedder, [turn.description for turn in conversation.turns], progress, cache
        )
        question_vectors = _embed_all(
            embedder, [question.text for question in conversation.questions], progress, cache
        )
        if cache is not None:
            cache.save()
        user, dia_ids = store_conversation(
            conversation=conversation, vectors=turn_vectors, marker=embedder.marker
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_memorynode")
        for question, vector in zip(conversation.questions, question_vectors, strict=True):
            record = {"conversation": conversation.sample_id, "category": question.category}
            for name, weights_for in retrievers.items():
                hits = memory_search(
                    user_id=user.pk,
                    text=question.text,
                    vector=vector,
                    limit=max(CUTOFFS),
                    weights=weights_for(configured),
                )
                ranked = [dia_ids[hit.id] for hit in hits]
                if name == "hybrid":
                    routing.add(
                        category=question.category,
                        text=question.text,
                        best_cosine=max((hit.components["vector"] for hit in hits), default=0.0),
                    )
                recalls = {
                    cutoff: len(question.evidence & set(ranked[:cutoff])) / len(question.evidence)
                    for cutoff in CUTOFFS
                }
                scores[name].add(question.category, recalls)
                record[name] = recalls[10]
            records.append(record)
    result = {name: score.summary() for name, score in scores.items()}
    result["routing"] = routing.summary()
    result["records"] = records
    result["run"] = {
        "embedder": embedder.marker,
        "conversations": len(dataset.conversations),
        "turns": sum(len(conversation.turns) for conversation in dataset.conversations),
        "skipped_questions": dataset.skipped_questions,
        "repaired_evidence_ids": dataset.repaired_evidence,
        "weights": vars(configured),
        "variants": {name: vars(weights) for name, weights in (variants or {}).items()},
        "embed_dim": settings.THALAMUS_EMBED_DIM,
    }
    return result


def _recall_at_10(records: list[dict], retriever: str) -> dict[str, float | int]:
    """recall@10 over `records`, overall and per category, with the question counts."""
    figures: dict[str, float | int] = {
        "overall": round(statistics.mean(r[retriever] for r in records), 4) if records else 0.0,
        "questions": len(records),
    }
    for category, name in CATEGORIES.items():
        mine = [r[retriever] for r in records if r["category"] == category]
        if mine:
            figures[name] = round(statistics.mean(mine), 4)
    return figures


def folds(records: list[dict], retrievers: list[str], *, held_back: int = 2) -> dict:
    """Tune on some conversations, check on the others, every split of `held_back` rotated.

    For each split the retriever (weighting) with the best recall@10 on the tuning conversations
    is chosen, and its figures on the held-back ones are what counts: nothing is chosen on the
    conversations it is checked on. Per conversation, every retriever's figures too.
    """
    conversations = sorted({r["conversation"] for r in records})
    result: dict = {
        "per_conversation": {
            conv: {
                name: _recall_at_10([r for r in records if r["conversation"] == conv], name)
                for name in retrievers
            }
            for conv in conversations
        },
        "folds": [],
    }
    if len(conversations) <= held_back:
        return result
    for checked in itertools.combinations(conversations, held_back):
        tuning = [r for r in records if r["conversation"] not in checked]
        held = [r for r in records if r["conversation"] in checked]
        on_tuning = {name: _recall_at_10(tuning, name)["overall"] for name in retrievers}
        chosen = max(retrievers, key=lambda name: on_tuning[name])
        result["folds"].append(
            {
                "tuned_on": [c for c in conversations if c not in checked],
                "held_back": list(checked),
                "chosen": chosen,
                "tuning": _recall_at_10(tuning, chosen),
                "held_back_figures": _recall_at_10(held, chosen),
                "held_back_hybrid": _recall_at_10(held, "hybrid"),
            }
        )
    return result
