from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.memory.seeds import SeedTruthsError, load_seed_truths


class Command(BaseCommand):
    help = "Load seed_truths.yaml (or THALAMUS_SEED_TRUTHS) into the global knowledge graph."

    def add_arguments(self, parser):
        parser.add_argument("--path", type=Path, help="Another seed file.")
        parser.add_argument(
            "--force",
            action="store_true",
            help="Load triples and facts even if the global graph is not empty.",
        )

    def handle(self, *args, path: Path | None, force: bool, verbosity: int, **options):
        """`up` runs this with verbosity 0 on every start: it then says only what it loaded."""
        try:
            result = load_seed_truths(path=path, only_if_empty=not force)
        except SeedTruthsError as exc:
            raise CommandError(str(exc))
        if result.skipped:
            if verbosity == 0:
                return
            self.stdout.write(
                f"{result.path}: {result.predicates} predicates merged; the graph already has "
                "global knowledge, so triples and facts were left alone (--force loads them)."
            )
            return
        self.stdout.write(
            self.style.SUCCESS(
                f"{result.path}: {result.predicates} predicates, {result.triples} triples, "
                f"{result.facts} facts loaded."
            )
        )
