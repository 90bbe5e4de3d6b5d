"""Familiarity or recollection (CLAM): is the fast track of facts and graph enough this turn?"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

FAMILIARITY_THRESHOLD = 0.4

# Phrases that ask about something that happened, in the five languages of the product.
_RECALL_CUES = re.compile(
    r"\b("
    r"remember|recall|last time|earlier|yesterday|last (week|month|year)|ago|"
    r"we (talked|discussed|spoke|said|decided|agreed)|you (told|said|suggested)|"
    r"did (i|we|you)|when did|what happened|"
    r"ricord\w*|l'ultima volta|ieri|settimana scorsa|abbiamo (parlato|detto|deciso)|"
    r"mi hai detto|"
    r"erinner\w*|letztes mal|gestern|neulich|haben wir|hast du (gesagt|mir)|"
    r"souvien\w*|rappelle\w*|la derni[eè]re fois|hier|avons (parl[eé]|dit|d[eé]cid[eé])|"
    r"on a (parl[eé]|dit)|"
    r"recuerd\w*|acuerd\w*|la [uú]ltima vez|ayer|hablamos|dijimos|decidimos|me dijiste"
    r")\b",
    re.IGNORECASE,
)


class Route(StrEnum):
    FAMILIARITY = "familiarity"
    RECOLLECTION = "recollection"


@dataclass(frozen=True)
class RouteDecision:
    name: Route
    reason: str


def route_turn(*, text: str, best_memory_score: float | None) -> RouteDecision:
    cue = _RECALL_CUES.search(text)
    if cue:
        return RouteDecision(
            Route.RECOLLECTION, f"the message asks about the past ({cue.group(0)!r})"
        )
    if best_memory_score is None:
        return RouteDecision(Route.RECOLLECTION, "nothing familiar: no memory matched")
    if best_memory_score < FAMILIARITY_THRESHOLD:
        return RouteDecision(
            Route.RECOLLECTION,
            f"weak familiarity: best memory scores {best_memory_score:.2f} "
            f"< {FAMILIARITY_THRESHOLD:.2f}",
        )
    return RouteDecision(
        Route.FAMILIARITY,
        f"familiar: best memory scores {best_memory_score:.2f} ≥ {FAMILIARITY_THRESHOLD:.2f}",
    )
