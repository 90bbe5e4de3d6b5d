"""What each source makes of a corpus message: the rules alone, and the rules with the model's
quotes as reflection puts them together (its extraction call on the one message, then
grounded_statements), with what the model's quotes found among them."""

from __future__ import annotations

import zlib
from datetime import date

from apps.cognition import reflection, statements
from apps.cognition.remembering import FOUND_BY_RULES
from apps.core.llm.outcomes import InvalidReply, Refused, TooLong
from tests.cognition.fact_corpus.scoring import LANGUAGES, Item

TODAY = date(2026, 11, 27)


def by_rules(item: Item) -> list:
    return statements.message_statements(item.text, today=TODAY)


def by_rules_and_model(item: Item) -> tuple[list, list, str]:
    """The statements kept, those of them the model's quotes found (alone or with a rule),
    and the model's error when its reply was unusable (reflection then keeps what the rules
    place, as here)."""
    try:
        quotes = reflection.extracted_quotes([item.text])
    except (InvalidReply, Refused, TooLong) as exc:
        quotes, error = {}, f"{type(exc).__name__}: {exc}"
    else:
        error = ""
    found, _rejected = reflection.grounded_statements(quotes=quotes, said=[item.text], today=TODAY)
    kept = [finding.statement for finding in found[0]]
    quoted = [finding.statement for finding in found[0] if finding.found_by != FOUND_BY_RULES]
    return kept, quoted, error


def real_sample(items: list[Item]) -> list[Item]:
    """Three messages that state something and two decoys per language, those whose text has
    the smallest checksum: the same from run to run, and unmoved by most additions."""
    chosen = []
    for language in LANGUAGES:
        own = sorted(
            (item for item in items if item.language == language),
            key=lambda item: zlib.crc32(item.text.encode()),
        )
        chosen += [item for item in own if item.facts][:3] + [
            item for item in own if not item.facts
        ][:2]
    return chosen
