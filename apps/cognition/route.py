"""The router: what a turn needs before its answer — nothing, tools, or a change of world state.

A rule decides first, with no LLM call: greetings and short follow-ups are answered directly,
a sum or the time needs tools, a question about what was said before needs the memory's tools,
a message that changes what the user works on changes the world state. A personal message no
rule places is answered directly, with what memory holds: a call to the router's model before
the answer costs seconds on a CPU. With `router_model_enabled` it costs one short structured
call instead; if that call fails, the turn is answered directly and the trace says why.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from apps.core.llm.fitting import Piece, bodies, template_prompt
from apps.core.llm.limits import ROUTER
from apps.core.llm.outcomes import LLMError
from apps.core.llm.structured import complete_as

logger = logging.getLogger(__name__)

ANSWER, GATHER, WORLD = "answer", "gather", "world"
RULE, MODEL, FALLBACK = "rule", "model", "fallback"

# A short follow-up in a conversation under way: the memory block and the history are enough.
FOLLOW_UP_WORDS = 6
# How many earlier messages the router's model sees.
ROUTER_HISTORY = 4

_WORD = re.compile(r"[\w']+", re.UNICODE)
_GREETING = re.compile(
    r"^(hi|hello|hey|hiya|yo|howdy|morning|evening|good (morning|afternoon|evening|night)|"
    r"thanks?|thank you|thx|ty|ok|okay|k|cool|great|nice|perfect|awesome|got it|"
    r"sounds good|bye|goodbye|see you|see ya|cheers|yes|no|yep|yeah|nope|sure|lol|haha|"
    r"ciao|hallo|salut|bonjour|hola|gracias|danke|merci)\b",
    re.IGNORECASE,
)
_ARITHMETIC = re.compile(r"\d\s*(?:[-+*/×÷^%]|\*\*)\s*\(?\s*-?\d")
_TIME = re.compile(
    r"\b(what(?:'s| is)? (?:the )?(?:time|date|day)|what time|today'?s date|what day is it|"
    r"current (?:time|date)|time is it|date today)\b",
    re.IGNORECASE,
)
_RECALL = re.compile(
    r"\b(do you remember|remember when|recall|remind me|last time|earlier|previously|"
    r"did (?:i|we) (?:tell|say|mention|ask|talk|discuss)|what did (?:i|we)|when did (?:i|we)|"
    r"have i (?:ever )?(?:told|said|mentioned)|we (?:talked|spoke|discussed)|"
    r"you (?:said|told me|mentioned)|in our (?:last|previous))\b",
    re.IGNORECASE,
)
_WORLD = re.compile(
    r"\b(i'?m (?:now )?working on|i am (?:now )?working on|"
    r"my (?:current |new |main )?(?:project|goal|focus) (?:is|will be)|"
    r"i want to (?:focus|work) on|let'?s (?:talk|focus) (?:about|on)|from now on|"
    r"(?:always|never) (?:answer|reply|respond|use|write)|please (?:always|never|stop)|"
    r"stop (?:using|saying|doing|calling)|call me|switch(?:ing)? (?:to|topics?)|new topic|"
    r"i'?ve (?:finished|completed|dropped|abandoned))\b",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|our|us)\b", re.I)


class RouteChoice(BaseModel):
    """What the router's model must answer."""

    route: Literal["answer", "gather", "world"]
    reason: str = Field(default="", max_length=300)


@dataclass(frozen=True)
class RouteDecision:
    route: str  # ANSWER, GATHER or WORLD
    reason: str
    by: str  # RULE, MODEL or FALLBACK
    error: str = ""

    def as_trace(self) -> dict:
        trace = {"route": self.route, "reason": self.reason, "by": self.by}
        if self.error:
            trace["error"] = self.error
        return trace


def route_by_rule(text: str, *, has_history: bool) -> RouteDecision | None:
    """The rule's decision, or None when only the router's model can tell."""
    words = _WORD.findall(text)
    if _WORLD.search(text):
        return RouteDecision(WORLD, "the message changes what the user works on or wants", RULE)
    if _ARITHMETIC.search(text):
        return RouteDecision(GATHER, "a calculation", RULE)
    if _TIME.search(text):
        return RouteDecision(GATHER, "asks for the time or date", RULE)
    if _RECALL.search(text):
        return RouteDecision(GATHER, "asks about what was said before", RULE)
    if len(words) <= 4 and _GREETING.match(text.strip()):
        return RouteDecision(ANSWER, "a greeting or an acknowledgement", RULE)
    if has_history and len(words) <= FOLLOW_UP_WORDS:
        return RouteDecision(ANSWER, "a short follow-up", RULE)
    if not _FIRST_PERSON.search(text):
        return RouteDecision(ANSWER, "not about the user: what memory holds is enough", RULE)
    return None


# A personal message no rule places, with the router's model off (its default).
PERSONAL_DIRECT = RouteDecision(
    ANSWER, "a personal message: answered directly with what memory holds", RULE
)


def route_by_model(text: str, *, history: list[dict]) -> RouteDecision:
    """One short structured call to the router's model; never raises."""
    lines = [f"{message['role']}: {message['content']}" for message in history[-ROUTER_HISTORY:]]
    try:
        prompt = template_prompt(
            "route",
            # The newest message is kept longest; a long one loses its middle.
            slots={
                "history": [Piece(line, keep=i, shorten=True) for i, line in enumerate(lines)],
                "message": bodies([text]),
            },
            empty="(none)",
        )
        choice = complete_as(RouteChoice, role=ROUTER, prompt=prompt)
    except LLMError as exc:
        logger.info("the router's model failed; answering directly: %s", exc)
        return RouteDecision(
            ANSWER,
            "the router's model failed, so the turn is answered directly",
            FALLBACK,
            error=f"{type(exc).__name__}: {exc}"[:300],
        )
    return RouteDecision(choice.route, choice.reason or "the router's model chose it", MODEL)
