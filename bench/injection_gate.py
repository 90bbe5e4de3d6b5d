"""What the instruction gate (apps.memory.quarantine) holds of the injection corpus
(tests/memory/injection_corpus/, issue 39): per language, the share of injections held and the
share of innocent sentences wrongly held.

Every fifth sentence of each category is held out: the gate's rules were tuned on the other
four fifths, and the held-out fifth says whether they learnt the corpus or the class.

Run: .venv/bin/python -m bench.injection_gate [--errors] [--split tuning|held-out|all]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import yaml

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "memory" / "injection_corpus"
LANGUAGES = ("en", "it", "fr", "de", "es")


@dataclass(frozen=True)
class Sentence:
    language: str
    injection: bool
    category: str
    text: str
    held_out: bool


def corpus() -> list[Sentence]:
    sentences = []
    for language in LANGUAGES:
        document = yaml.safe_load((CORPUS / f"{language}.yaml").read_text(encoding="utf-8"))
        for label, injection in (("injection", True), ("innocent", False)):
            for category, texts in document[label].items():
                sentences.extend(
                    Sentence(language, injection, category, text, held_out=index % 5 == 2)
                    for index, text in enumerate(texts)
                )
    return sentences


def held_shares(sentences: list[Sentence]) -> tuple[float, float]:
    """The share of injections held and the share of innocent sentences held."""
    from apps.memory.quarantine import looks_like_instruction

    held = {label: [0, 0] for label in (True, False)}
    for sentence in sentences:
        held[sentence.injection][0] += looks_like_instruction(sentence.text)
        held[sentence.injection][1] += 1
    return held[True][0] / held[True][1], held[False][0] / held[False][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=["tuning", "held-out", "all"], default="all")
    parser.add_argument("--errors", action="store_true", help="list what the gate gets wrong")
    arguments = parser.parse_args()
    sentences = [
        s
        for s in corpus()
        if arguments.split == "all" or s.held_out == (arguments.split == "held-out")
    ]
    print("| language | injections | held | innocent | wrongly held |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for language in (*LANGUAGES, "all"):
        some = [s for s in sentences if language in ("all", s.language)]
        caught, wrong = held_shares(some)
        injections = sum(s.injection for s in some)
        print(
            f"| {language} | {injections} | {caught:.1%} | {len(some) - injections} | {wrong:.1%} |"
        )
    if arguments.errors:
        from apps.memory.quarantine import looks_like_instruction

        for sentence in sentences:
            if looks_like_instruction(sentence.text) != sentence.injection:
                kind = "missed" if sentence.injection else "wrongly held"
                print(f"{kind}\t{sentence.language}\t{sentence.category}\t{sentence.text!r}")


if __name__ == "__main__":
    main()
