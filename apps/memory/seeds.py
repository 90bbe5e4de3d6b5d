"""seed_truths.yaml: the global predicates, triples and facts a fresh install starts with."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.conf import settings
from django.db import transaction
from pydantic import ValidationError

from apps.memory import graph_services, services
from apps.memory.models import MemoryNode, Triple
from apps.memory.schemas import SeedTruths


class SeedTruthsError(Exception):
    """The seed file cannot be read or does not have the expected shape; names the line."""


@dataclass
class SeedResult:
    path: Path
    predicates: int = 0
    triples: int = 0
    facts: int = 0
    skipped: bool = False


def seed_truths_path() -> Path:
    raw = os.environ.get("THALAMUS_SEED_TRUTHS", "").strip()
    return Path(raw) if raw else Path(settings.BASE_DIR) / "seed_truths.yaml"


def _line_of(root: yaml.Node | None, location: tuple) -> int | None:
    """The 1-based line of the YAML node at a Pydantic error location, as near as it exists."""
    node = root
    for part in location:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            child = next((v for k, v in node.value if k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            child = node.value[part] if part < len(node.value) else None
        else:
            child = None
        if child is None:
            break
        node = child
    return node.start_mark.line + 1 if node is not None else None


def parse_seed_truths(path: Path) -> SeedTruths:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SeedTruthsError(f"{path}: cannot read the seed file ({exc.strerror}).")
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        problem = getattr(exc, "problem", None) or str(exc)
        raise SeedTruthsError(f"{path}, {where}: invalid YAML: {problem}")
    try:
        return SeedTruths.model_validate(data or {})
    except ValidationError as exc:
        error = exc.errors()[0]
        line = _line_of(root, tuple(error["loc"]))
        field = ".".join(str(part) for part in error["loc"]) or "top level"
        where = f"line {line}" if line else "top level"
        raise SeedTruthsError(f"{path}, {where}: {field}: {error['msg']}")


def graph_is_empty() -> bool:
    return not Triple.objects.filter(owner=None).exists() and not (
        MemoryNode.objects.filter(owner=None).exists()
    )


def load_seed_truths(*, path: Path | None = None, only_if_empty: bool = False) -> SeedResult:
    """Load the seed file: predicates always merge in; triples and facts only into an empty graph
    when `only_if_empty`. Facts are embedded afterwards by a task, so start-up never waits on the
    LLM."""
    path = path or seed_truths_path()
    truths = parse_seed_truths(path)
    result = SeedResult(path=path)
    with transaction.atomic():
        for predicate in truths.predicates:
            graph_services.predicate_upsert(**predicate.model_dump())
            result.predicates += 1
        if only_if_empty and not graph_is_empty():
            result.skipped = True
            return result
        for triple in truths.triples:
            graph_services.triple_upsert(
                owner=None, provenance=f"seed: {path.name}", **triple.model_dump()
            )
            result.triples += 1
        for fact in truths.facts:
            services.memory_node_create(
                owner=None,
                state=MemoryNode.State.PROMOTED,
                confidence_score=5,
                origin_context=f"seed: {path.name}",
                source=MemoryNode.Source.ADMIN,
                embed=False,
                **fact.model_dump(),
            )
            result.facts += 1
    return result
