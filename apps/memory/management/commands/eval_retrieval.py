from __future__ import annotations

import json
import os
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.memory.embedding import EmbeddingError, get_embedder
from apps.memory.evaluation import (
    CATEGORIES,
    CUTOFFS,
    VectorCache,
    evaluate,
    folds,
    load_locomo,
    throwaway_database,
)
from apps.memory.search_selectors import Weights

# all-MiniLM-L6-v2, the only model the local embedder runs.
LOCAL_MODEL_DIM = 384


class Command(BaseCommand):
    help = (
        "Evidence recall@5/10/20 on a LoCoMo file for hybrid, plain vector and plain full-text "
        "retrieval, on a throwaway database."
    )

    def add_arguments(self, parser):
        parser.add_argument("--locomo", type=Path, required=True, help="LoCoMo-shaped JSON file.")
        parser.add_argument(
            "--json", dest="json_path", type=Path, help="Also write the figures to this file."
        )
        parser.add_argument(
            "--embedder", choices=["local", "openai"], help="Default: THALAMUS_EMBEDDER."
        )
        parser.add_argument(
            "--cache",
            type=Path,
            help="Keep the vectors in this JSON file between runs (keyed by model and text).",
        )
        parser.add_argument(
            "--variants",
            type=Path,
            help="JSON object: name -> hybrid weights (Weights' fields) to ask beside the "
            "configured ones, on the same stored memories.",
        )
        parser.add_argument(
            "--folds",
            action="store_true",
            help="Also report per conversation, and per split: tuned (best weighting) on all "
            "but two conversations, checked on those two, every pair held back in turn.",
        )

    def handle(self, *args, locomo: Path, json_path: Path | None, embedder: str | None, **options):
        self.verbosity = options["verbosity"]
        if not locomo.is_file():
            raise CommandError(f"No such file: {locomo}")
        variants = {}
        if options["variants"]:
            variants = {
                name: Weights(**fields)
                for name, fields in json.loads(options["variants"].read_text()).items()
            }
        if embedder:
            os.environ["THALAMUS_EMBEDDER"] = embedder
        if os.environ.get("THALAMUS_EMBEDDER", "").strip().lower() == "local":
            # The evaluation has its own database, so the local model's size is the column's.
            settings.THALAMUS_EMBED_DIM = LOCAL_MODEL_DIM
        dataset = load_locomo(locomo)
        started = time.monotonic()
        try:
            chosen = get_embedder(timeout=60)
            with throwaway_database(dim=chosen.dim):
                result = evaluate(
                    dataset=dataset,
                    embedder=chosen,
                    progress=self._progress,
                    variants=variants,
                    cache=VectorCache(options["cache"]),
                )
        except EmbeddingError as exc:
            raise CommandError(str(exc))
        result["run"]["seconds"] = round(time.monotonic() - started, 1)
        if options["folds"]:
            result["folds"] = folds(result["records"], ["hybrid", *variants])
        self._report(result, variants)
        if json_path:
            json_path.write_text(json.dumps(result, indent=2) + "\n")
            self.stdout.write(f"Wrote {json_path}")

    def _progress(self, message: str) -> None:
        if self.verbosity > 1:
            self.stderr.write(message)

    def _report(self, result: dict, variants: dict) -> None:
        run = result["run"]
        self.stdout.write(
            f"{run['embedder']}: {run['conversations']} conversations, {run['turns']} turns, "
            f"{result['hybrid']['overall']['questions']} questions (categories 1-4), "
            f"{run['skipped_questions']} skipped for want of usable evidence, "
            f"{run['seconds']} s"
        )
        header = ["retriever", "scope", *(f"R@{cutoff}" for cutoff in CUTOFFS), "n"]
        self.stdout.write("  ".join(f"{cell:<12}" for cell in header))
        for retriever in ("hybrid", "vector", "fulltext", *variants):
            for scope in ("overall", *CATEGORIES.values()):
                figures = result[retriever].get(scope)
                if figures is None:
                    continue
                cells = [retriever, scope]
                cells += [f"{figures[f'recall@{cutoff}']:.3f}" for cutoff in CUTOFFS]
                cells.append(str(figures["questions"]))
                self.stdout.write("  ".join(f"{cell:<12}" for cell in cells))
        routing = result["routing"]
        self.stdout.write(
            f"Routing (familiar at raw cosine >= {routing['familiar_cosine']:.2f}; "
            f"best separating cosine here {routing['calibrated_cosine']:.2f}):"
        )
        header = ["category", "recollection", "fast track", "by cue", "n"]
        self.stdout.write("  ".join(f"{cell:<12}" for cell in header))
        for scope in CATEGORIES.values():
            figures = routing.get(scope)
            if figures is None:
                continue
            cells = [scope, f"{figures['recollection']:.3f}", f"{figures['familiarity']:.3f}"]
            cells += [f"{figures['by_cue']:.3f}", str(figures["questions"])]
            self.stdout.write("  ".join(f"{cell:<12}" for cell in cells))
        if "folds" in result:
            self._report_folds(result["folds"], ["hybrid", *variants])

    def _report_folds(self, found: dict, retrievers: list[str]) -> None:
        scopes = ["overall", *CATEGORIES.values()]
        self.stdout.write("recall@10 per conversation:")
        self.stdout.write("  ".join(f"{cell:<12}" for cell in ["conv", "retriever", *scopes]))
        for conv, figures in found["per_conversation"].items():
            for name in retrievers:
                cells = [conv, name]
                cells += [f"{figures[name].get(scope, float('nan')):.3f}" for scope in scopes]
                self.stdout.write("  ".join(f"{cell:<12}" for cell in cells))
        if not found["folds"]:
            return
        self.stdout.write("recall@10 on the held-back conversations, weighting chosen on the rest:")
        header = ["held back", "chosen", "tuning", *scopes, "configured"]
        self.stdout.write("  ".join(f"{cell:<12}" for cell in header))
        for fold in found["folds"]:
            held = fold["held_back_figures"]
            cells = ["+".join(c.removeprefix("conv-") for c in fold["held_back"]), fold["chosen"]]
            cells.append(f"{fold['tuning']['overall']:.3f}")
            cells += [f"{held.get(scope, float('nan')):.3f}" for scope in scopes]
            cells.append(f"{fold['held_back_hybrid']['overall']:.3f}")
            self.stdout.write("  ".join(f"{cell:<12}" for cell in cells))
