"""What the memory makes of the labelled fact corpus's chat messages (tests/cognition/fact_corpus/,
issue 37): per language, the precision of single-valued facts (name, age, home, origin, job,
employer, studies), the precision of all facts and the recall, by source.

- rules: the rules alone (statements.message_statements), on the whole corpus; no server.
- with --real (SmolLM2-135M-Instruct on llama-server, as `make real-llm` builds it) or --llm-url:
  reflection's extraction call on each message, then grounded_statements, as a reflection does:
  "rules + model" is what it keeps, "model" what the model's quotes found (alone or with a
  rule), "rules" what the rules alone make.
  --sample keeps the real tier's sample (25 messages) instead of the whole corpus.

Each false fact and each miss is listed after the table.

Run: .venv/bin/python -m bench.fact_corpus [--real | --llm-url URL --model NAME] [--sample]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from bench import _llama

BENCH_DATABASE = "bench_fact_corpus"
INSTANCE = "bench-fact-corpus"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", action="store_true", help="start SmolLM2-135M on llama-server")
    parser.add_argument("--llm-url", help="an OpenAI-compatible server's /v1 URL to ask instead")
    parser.add_argument("--model", default=_llama.MODEL_NAME, help="the model's name there")
    parser.add_argument("--sample", action="store_true", help="only the real tier's sample")
    return parser.parse_args()


def _point_at(url: str, model: str) -> None:
    from apps.core.models import RuntimeConfig
    from apps.core.selectors import forget_runtime_config
    from apps.core.services import runtime_config_save

    config = RuntimeConfig.objects.order_by("pk").first() or RuntimeConfig()
    config.llm_base_url = url
    config.chat_model = model
    config.turns_per_minute = 0
    runtime_config_save(config=config)
    forget_runtime_config()


def _row(language: str, source: str, score) -> str:
    right, keyed = score.single_valued
    kept, made = score.all_facts
    found, stated = score.found
    return (
        f"| {language} | {source} | {score.single_valued_precision:.3f} ({right}/{keyed}) "
        f"| {score.precision:.3f} ({kept}/{made}) | {score.recall:.3f} ({found}/{stated}) |"
    )


def main() -> None:
    args = _arguments()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")
    process = None
    url = args.llm_url
    if args.real:
        process, server = _llama.start(4096)
        url = server.url
    try:
        if url:
            from bench._harness import django_on_fresh_database

            django_on_fresh_database(database=BENCH_DATABASE, instance=INSTANCE, llm_url=url)
            _point_at(url, args.model)
        else:
            import django

            django.setup()
        _report(args, url)
    finally:
        if process:
            _llama.stop(process)


def _report(args: argparse.Namespace, url: str | None) -> None:
    from tests.cognition.fact_corpus import sources
    from tests.cognition.fact_corpus.scoring import LANGUAGES, Outcome, by_language, corpus

    items = corpus()
    if args.sample:
        items = sources.real_sample(items)
    started = time.monotonic()
    rules = [Outcome(item, sources.by_rules(item)) for item in items]
    print(f"rules: {len(items)} messages in {time.monotonic() - started:.1f} s")
    tables = {"rules": by_language(rules)}
    if url:
        model, both, errors = [], [], []
        started = time.monotonic()
        for item in items:
            kept, quoted, error = sources.by_rules_and_model(item)
            both.append(Outcome(item, kept))
            model.append(Outcome(item, quoted))
            if error:
                errors.append(f"[{item.language}] {item.text!r}: {error}")
        print(
            f"rules + model ({args.model} at {url}): {len(items)} messages in "
            f"{time.monotonic() - started:.1f} s, {len(errors)} unusable replies"
        )
        print("\n".join(errors))
        tables["model"] = by_language(model)
        tables["rules + model"] = by_language(both)
    decoys = sum(1 for item in items if not item.facts)
    command = " ".join([".venv/bin/python -m bench.fact_corpus", *sys.argv[1:]])
    print(f"\n{len(items)} messages, {decoys} decoys; command: {command}\n")
    print("| language | source | single-valued precision | precision | recall |")
    print("| --- | --- | --- | --- | --- |")
    for language in [*LANGUAGES, "all"]:
        for source, scores in tables.items():
            print(_row(language, source, scores[language]))
    for source, scores in tables.items():
        print(f"\n## {source}\n{scores['all'].report()}")


if __name__ == "__main__":
    main()
