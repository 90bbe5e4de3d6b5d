"""The internal debate (CLAM §4): an antagonistic review of the answer's draft.

Before an answer is shown, a second call plays devil's advocate against the draft, holding it to
the rules and preferences the user taught; a draft that breaks one is rewritten with the
critique. The turn itself (draft, review, rewrite, streaming) reads in apps/cognition/answer.py;
this module holds the review, the rewrite's request and the record of the debate.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from apps.core.llm.fitting import Piece, bodies, fit, message_piece, ranked_lines, template_prompt
from apps.core.llm.limits import CRITIC, TokenCounter
from apps.core.llm.structured import complete_as
from apps.core.models import Event
from apps.core.services import event_record
from apps.memory.provenance import marker_system
from apps.memory.renderer import memory_line

REVIEWING = "Reviewing the draft…"

REWRITE = (
    "A reviewer found that your answer above breaks rules or preferences the user has taught "
    "you:\n{violations}\n\nCritique: {critique}\n\nWrite the answer again, fixing this. Reply "
    "with the corrected answer only, without mentioning the review or the earlier draft."
)


class DraftReview(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # The violations come first so the model argues before it decides.
    violations: list[str] = Field(default_factory=list)
    verdict: Literal["ok", "rewrite"]
    critique: str = ""

    @field_validator("violations")
    @classmethod
    def _drop_blank(cls, violations: list[str]) -> list[str]:
        return [" ".join(v.split()) for v in violations if v.strip()]


def rule_lines(descriptions: list[str]) -> list[str]:
    return [memory_line(description) for description in descriptions]


def review_draft(*, rules: list[str], question: str, draft: str, marker: str = "") -> DraftReview:
    """The critic's review of `draft` against the user's rules and preferences (their lines).
    The question is the one the answer was asked, with its memory note: its data datamarked
    with `marker`, which the system message then explains.

    Raises the gateway's outcomes.
    """
    prompt = template_prompt(
        "debate",
        slots={
            "rules": ranked_lines(rules),
            "question": bodies([question]),
            "draft": bodies([draft]),
        },
        system=marker_system(marker, [question]),
    )
    # The user waits for it: it holds the slot as the answer does.
    return complete_as(DraftReview, role=CRITIC, prompt=prompt, foreground=True)


def rewrite_messages(
    *, messages: list[dict], draft: str, review: DraftReview, budget: int, counter: TokenCounter
) -> list[dict]:
    """The answer's request, then its draft and the instruction to fix it, fitted to the window.

    The answer's prompt already fills the window minus the answer's cap, and the draft and the
    critique come on top: the oldest history goes first, then the draft loses its middle.
    """
    system, *history, question = messages
    instruction = REWRITE.format(
        violations="\n".join(f"- {v}" for v in review.violations) or "- (not listed)",
        critique=review.critique or "(none given)",
    )
    pieces: list[Piece] = [message_piece(system["content"])]
    pieces += [message_piece(m["content"], index) for index, m in enumerate(history)]
    pieces += [
        message_piece(question["content"]),
        message_piece(draft, shorten=True),
        message_piece(instruction),
    ]
    texts = fit(pieces, budget=budget, counter=counter)
    kept_history = [
        {"role": m["role"], "content": text}
        for m, text in zip(history, texts[1:-3], strict=True)
        if text is not None
    ]
    return [
        {"role": "system", "content": texts[0]},
        *kept_history,
        {"role": question["role"], "content": texts[-3]},
        {"role": "assistant", "content": texts[-2]},
        {"role": "user", "content": texts[-1]},
    ]


def debate_record(*, owner, reply_id: int, conversation_id: int, debate: dict) -> Event:
    """The debate on the owner's stream of consciousness (pushed to an open dashboard)."""
    review = debate.get("review")
    if debate.get("error") and not debate.get("rewritten"):
        summary = f"The draft was sent unreviewed: {debate['error']}"
    elif debate.get("rewritten"):
        summary = "Rewrote a draft that broke a rule: " + "; ".join(review["violations"])
        if not review["violations"]:
            summary += review["critique"]
    elif debate.get("cancelled"):
        summary = "A draft's debate was stopped."
    else:
        summary = f"A draft withstood the review against {debate['rules']} rules and preferences."
    payload = {
        "message_id": reply_id,
        "conversation_id": conversation_id,
        "rules": debate["rules"],
        "rewritten": bool(debate.get("rewritten")),
        "timings_ms": debate["timings_ms"],
    }
    if review is not None:
        payload.update(
            verdict=review["verdict"], violations=review["violations"], critique=review["critique"]
        )
    if debate.get("error"):
        payload["error"] = debate["error"]
    return event_record(kind=Event.Kind.DEBATE, summary=summary, owner=owner, payload=payload)
