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

# Calibrated on the LoCoMo dev half with all-MiniLM-L6-v2 (bench/README.md, "Familiarity
# routing"): the cosine with the best balanced accuracy between single-hop questions (fast track)
# and multi-hop and temporal ones (recollection), once recall cues have routed theirs.
FAMILIAR_COSINE = 0.44
# Every meaningful word of a known triple's object (and of its subject, unless it is the user)
# appears in the message: the graph already names what the message is about.
FAMILIAR_TRIPLE_MATCH = 1.0

# Common words by language, to tell which language a message is in. "hier" is German (here), so
# a German message never has a French cue.
_STOPWORD_TEXT = {
    "en": """the and is are was were you what did do does have has i my we of to in it that this
             with for on me about when how your be am here""",
    "it": """il lo gli che di è sono non per con una un mi ti cosa come quando abbiamo hai ho del
             della qui questo ma ci sei siamo""",
    "de": """der die das und ist ich du nicht mit ein eine wir was wann haben hast bin hier auf zu
             den dem es sie mir dich auch wie bist sind""",
    "fr": """le les et est je tu nous vous pas une des du que qui avons as ai suis sur avec dans ce
             cette quoi quand comment on moi j qu ici""",
    "es": """el los las y es yo tú que una por con para del qué cuándo cómo estoy aquí me mi no en
             lo estás somos""",
}
STOPWORDS_BY_LANGUAGE = {
    language: frozenset(text.split()) for language, text in _STOPWORD_TEXT.items()
}
_ALL_STOPWORDS = frozenset().union(*STOPWORDS_BY_LANGUAGE.values())

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
_WORD_RE = re.compile(r"\w+", re.UNICODE)


class Route(StrEnum):
    FAMILIARITY = "familiarity"
    RECOLLECTION = "recollection"


@dataclass(frozen=True)
class RecallRoute:
    """Which way a turn's recall goes, familiarity or recollection, and why."""

    name: Route
    reason: str


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text.casefold())


def message_language(text: str) -> str | None:
    """The language with the most common words in `text`; None when none leads."""
    words = _words(text)
    counts = {
        language: sum(word in stopwords for word in words)
        for language, stopwords in STOPWORDS_BY_LANGUAGE.items()
    }
    best = max(counts.values())
    leaders = [language for language, count in counts.items() if count == best]
    return leaders[0] if best and len(leaders) == 1 else None


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
