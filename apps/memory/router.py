"""Familiarity or recollection (CLAM): is the fast track of facts and graph enough this turn?

Familiarity is measured on raw similarities, never on the fused, min-max normalised score (which
makes the best candidate of any query look familiar): the best cosine similarity between the
message and a memory, and the best word match of the message with a known triple. A message that
asks about the past, in its own language, always takes the recollection route.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from apps.language.detect import ALL_STOPWORDS as _ALL_STOPWORDS
from apps.language.detect import message_language
from apps.language.text import words as _words

# Calibrated on the LoCoMo dev half with all-MiniLM-L6-v2 (bench/README.md, "Familiarity
# routing"): the cosine with the best balanced accuracy between single-hop questions (fast track)
# and multi-hop and temporal ones (recollection), once recall cues have routed theirs.
FAMILIAR_COSINE = 0.44
# Every meaningful word of a known triple's object (and of its subject, unless it is the user)
# appears in the message: the graph already names what the message is about.
FAMILIAR_TRIPLE_MATCH = 1.0

# Phrases that ask about something that happened, per language; each only counts in its language.
RECALL_CUES = {
    "en": (
        r"remember|recall|last time|earlier|yesterday|last (week|month|year)|ago|"
        r"we (talked|discussed|spoke|said|decided|agreed)|you (told|said|suggested)|"
        r"did (i|we|you)|when did|what happened"
    ),
    "it": (
        r"ricord(i|a|ate|avi|ano)|ti ricordi|l'ultima volta|ieri|settimana scorsa|"
        r"abbiamo (parlato|detto|deciso)|mi hai detto|quando (ho|abbiamo|hai)"
    ),
    "de": (
        r"erinner\w*|letztes mal|gestern|neulich|"
        r"haben wir (\w+ )?(gesprochen|gesagt|besprochen|beschlossen)|hast du (gesagt|mir)|"
        r"wann (habe|haben|hast) "
    ),
    "fr": (
        r"souvien\w*|te rappelles|vous rappelez|la derni[eè]re fois|hier|"
        r"avons (parl[eé]|dit|d[eé]cid[eé])|on a (parl[eé]|dit)|quand (ai|avons|as)"
    ),
    "es": (
        r"recuerd(as|a|an|o)|te acuerdas|se acuerda|la [uú]ltima vez|ayer|hablamos|dijimos|"
        r"decidimos|me dijiste|cu[aá]ndo (fui|fuimos|dije)"
    ),
}
_CUES = {
    language: re.compile(rf"\b({pattern})\b", re.IGNORECASE)
    for language, pattern in RECALL_CUES.items()
}


class Route(StrEnum):
    FAMILIARITY = "familiarity"
    RECOLLECTION = "recollection"


@dataclass(frozen=True)
class RecallRoute:
    """Which way a turn's recall goes, familiarity or recollection, and why."""

    name: Route
    reason: str


def recall_cue(text: str) -> str | None:
    """The phrase of `text` that asks about the past, read in the message's language.

    A message too short to tell its language ("Yesterday?") is read in every language, but then
    a cue that is a common word elsewhere (French "hier", German "here") does not count.
    """
    language = message_language(text)
    if language is not None:
        cue = _CUES[language].search(text)
        return cue.group(0) if cue else None
    for pattern in _CUES.values():
        for cue in pattern.finditer(text):
            if cue.group(0).casefold() not in _ALL_STOPWORDS:
                return cue.group(0)
    return None


def triple_match(*, text: str, triples: Iterable[tuple[str, str]]) -> float:
    """The best share of a known (subject, object)'s meaningful words found in `text`."""
    said = set(_words(text))
    best = 0.0
    for subject, obj in triples:
        named = obj if subject.casefold() == "user" else f"{subject} {obj}"
        words = {word for word in _words(named) if word not in _ALL_STOPWORDS}
        if words:
            best = max(best, len(words & said) / len(words))
    return best


def route_turn(
    *, text: str, best_memory_cosine: float | None, best_triple_match: float = 0.0
) -> RecallRoute:
    cue = recall_cue(text)
    if cue:
        return RecallRoute(Route.RECOLLECTION, f"the message asks about the past ({cue!r})")
    if best_triple_match >= FAMILIAR_TRIPLE_MATCH:
        return RecallRoute(Route.FAMILIARITY, "familiar: the message names a known fact")
    if best_memory_cosine is None:
        return RecallRoute(Route.RECOLLECTION, "nothing familiar: no memory was compared")
    if best_memory_cosine < FAMILIAR_COSINE:
        return RecallRoute(
            Route.RECOLLECTION,
            f"weak familiarity: best memory cosine {best_memory_cosine:.2f} "
            f"< {FAMILIAR_COSINE:.2f}",
        )
    return RecallRoute(
        Route.FAMILIARITY,
        f"familiar: best memory cosine {best_memory_cosine:.2f} ≥ {FAMILIAR_COSINE:.2f}",
    )
