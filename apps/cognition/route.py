"""The router: what a turn needs besides its answer — nothing, tools first, or a change of world
state after it.

Rules decide, with no LLM call (one before the answer cost 1.5-6.9 s a turn with a 135M model
on a CPU): greetings and short follow-ups are answered directly, a sum or the time needs tools,
a question about what was said before needs the memory's tools, a message that changes what the
user works on or how they want answers changes the world state, after the answer. A personal
message no rule places is answered directly, with what memory holds (and, with
`router_model_enabled`, shown to the world modifier after the answer: `world`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
