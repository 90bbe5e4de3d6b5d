"""A memory's confidence: the score it keeps (votes) and the percent every page shows.

In core, below memory, so the runtime configuration's admin can show its thresholds on the
same scale as the pages.
"""

from __future__ import annotations


def confidence_share(score: int) -> float:
    """A memory's confidence score (its votes: confirmations and the critic's verdicts) on the
    facts' 0 to 1 scale, as the recall weighs it (search_selectors' `confidence`): a new memory
    (1) is a third, one confirmation makes it a half, and it nears 1 as votes add up."""
    votes = max(score, 0)
    return votes / (votes + 2)


def score_at_least(percent: int) -> int:
    """The lowest score whose share is at least `percent` (below 100): s / (s + 2) >= p / 100."""
    return -(-2 * percent // (100 - percent))


def score_at_most(percent: int) -> int:
    """The highest score whose share is at most `percent` (below 100)."""
    return 2 * percent // (100 - percent)
