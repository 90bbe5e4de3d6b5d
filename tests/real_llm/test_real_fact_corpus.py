"""The fact corpus's sample (tests/cognition/fact_corpus/) with the real SmolLM2-135M: its quotes
added to the rules, as reflection adds them, never make a false name, home or job. Both sources'
figures are printed (`-s`); bench/fact_corpus.py measures the whole corpus."""

from __future__ import annotations

import pytest

from tests.cognition.fact_corpus.scoring import Outcome, Score, corpus
from tests.cognition.fact_corpus.sources import by_rules, by_rules_and_model, real_sample

pytestmark = [pytest.mark.real_llm, pytest.mark.django_db(transaction=True)]


def test_the_models_quotes_make_no_false_single_valued_fact(on_real_llm):
    on_real_llm()
    sample = real_sample(corpus())
    rules = Score([Outcome(item, by_rules(item)) for item in sample])
    model, both, errors = [], [], []
    for item in sample:
        kept, quoted, error = by_rules_and_model(item)
        both.append(Outcome(item, kept))
        model.append(Outcome(item, quoted))
        errors += [f"{item.text!r}: {error}"] if error else []
    combined = Score(both)
    print(f"\n{len(sample)} messages, {sum(not item.facts for item in sample)} decoys")
    print(f"rules alone: {rules.figures()}")
    print(f"SmolLM2-135M's quotes: {Score(model).figures()}")
    print(f"rules + SmolLM2-135M: {combined.figures()} ({len(errors)} unusable replies)")
    print(combined.report())
    assert combined.single_valued_precision >= 0.98, combined.report()
    assert len(errors) < len(sample) / 2, errors
