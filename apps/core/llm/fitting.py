"""The one budgeting function: every prompt fits the model's window minus the reply's cap.

A prompt is a list of pieces. Over budget, droppable pieces go first, lowest `keep` first (the
answer's oldest history, its least relevant knowledge, its lowest-scored memories); then long
bodies marked `shorten` lose their middle behind a visible marker (a reflection's exchange, an
episode's messages) — they are never dropped whole. What still does not fit is refused with the
counts, so the caller can say so in one sentence instead of sending the server a prompt it
would refuse (llama.cpp) or silently cut (Ollama).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from apps.core.llm.limits import TOKENS_PER_MESSAGE, ModelLimits, TokenCounter
from apps.core.llm.outcomes import TooLong

NEVER = math.inf
# A shortened body keeps at least this much, split between its start and its end.
MIN_KEPT_TOKENS = 48
MARKER = "\n[… {count:,} characters left out …]\n"


@dataclass
class Piece:
    text: str
    keep: float = NEVER
    shorten: bool = False
    # Tokens the piece costs besides its text (a chat message's role markers).
    extra: int = 0


def message_piece(text: str, keep: float = NEVER, shorten: bool = False) -> Piece:
    return Piece(text, keep, shorten, TOKENS_PER_MESSAGE)


@dataclass(frozen=True)
class Room:
    """What one model leaves a prompt: its limits and token counter, minus what the gateway adds
    to the prompt itself (a schema written into it, tool definitions, a repair's exchange)."""

    limits: ModelLimits
    counter: TokenCounter
    reserved: int = 0

    @property
    def budget(self) -> int:
        return max(self.limits.prompt_budget - self.reserved, 0)

    def less(self, tokens: int) -> Room:
        return replace(self, reserved=self.reserved + tokens)


# A prompt is its messages, fixed, or a function that fits them to a model's room: the gateway
# calls it once for each model it asks (the role's own, then each fallback in turn).
PromptBuilder = Callable[[Room], list[dict]]
Prompt = list[dict] | PromptBuilder


def messages_for(prompt: Prompt, room: Room) -> list[dict]:
    """The prompt's messages for `room`; TooLong rather than a prompt the server would refuse
    (llama.cpp) or silently cut (Ollama)."""
    messages = prompt(room) if callable(prompt) else prompt
    needed = room.counter.messages(messages)
    if needed > room.budget:
        raise TooLong(needed=needed, budget=room.budget, model=room.limits.model)
    return messages


def shorten_middle(text: str, keep_chars: int) -> str:
    """`text` with its middle replaced by a marker so that about `keep_chars` remain."""
    if len(text) <= keep_chars:
        return text
    keep_chars = max(keep_chars, 2)
    head = keep_chars * 2 // 3
    tail = keep_chars - head
    left_out = len(text) - head - tail
    return text[:head] + MARKER.format(count=left_out) + text[len(text) - tail :]


def fit(pieces: list[Piece], *, budget: int, counter: TokenCounter) -> list[str | None]:
    """The pieces' texts in their order, None for each dropped one, shortened where needed."""
    texts: list[str | None] = [piece.text for piece in pieces]
    costs = [counter.text(piece.text) + piece.extra for piece in pieces]
    total = sum(costs)
    droppable = sorted(
        (i for i, piece in enumerate(pieces) if piece.keep != NEVER and not piece.shorten),
        key=lambda i: (pieces[i].keep, i),
    )
    for i in droppable:
        if total <= budget:
            break
        total -= costs[i]
        texts[i] = None
    longest_first = sorted(
        (i for i, piece in enumerate(pieces) if piece.shorten), key=lambda i: -costs[i]
    )
    for i in longest_first:
        if total <= budget:
            break
        wanted = max(costs[i] - (total - budget), MIN_KEPT_TOKENS + pieces[i].extra)
        if wanted >= costs[i]:
            continue
        marker_tokens = counter.text(MARKER.format(count=len(pieces[i].text)))
        keep_chars = int((wanted - pieces[i].extra - marker_tokens) * counter.chars_per_token)
        shortened = shorten_middle(pieces[i].text, max(keep_chars, 0))
        cost = counter.text(shortened) + pieces[i].extra
        total -= costs[i] - cost
        texts[i] = shortened
    if total > budget:
        raise TooLong(needed=total, budget=budget)
    return texts


def template_prompt(
    name: str, *, slots: dict[str, list[Piece]], empty: str = "", system: str = ""
) -> PromptBuilder:
    """Prompt template `name` with each slot's pieces (one a line), as one user message fitted
    to whichever model is asked; after a system message `system`, when one is given.

    Used for the background prompts (reflection, critic, episode): a long message in them is
    shortened in its middle, known memories beyond the budget are left out, least relevant
    first.
    """
    from apps.core.prompts import fill_prompt
    from apps.core.selectors import prompt_text

    template = prompt_text(name)
    frame = fill_prompt(name, template, **{slot: "" for slot in slots})
    pieces = [message_piece(frame)] + ([message_piece(system)] if system else [])
    for slot_pieces in slots.values():
        pieces += slot_pieces

    def build(room: Room) -> list[dict]:
        fitted = fit(pieces, budget=room.budget, counter=room.counter)
        texts = iter(fitted[2 if system else 1 :])
        values = {}
        for slot, slot_pieces in slots.items():
            kept = [text for text in (next(texts) for _ in slot_pieces) if text is not None]
            values[slot] = "\n".join(kept) or empty
        asked = {"role": "user", "content": fill_prompt(name, template, **values)}
        return [{"role": "system", "content": system}, asked] if system else [asked]

    return build


def ranked_lines(lines: list[str]) -> list[Piece]:
    """Lines best first: over budget the last ones go first."""
    return [Piece(line, keep=-index) for index, line in enumerate(lines)]


def fixed_lines(lines: list[str]) -> list[Piece]:
    return [Piece(line) for line in lines]


def bodies(lines: list[str]) -> list[Piece]:
    """Long texts that may lose their middle but are never left out."""
    return [Piece(line, shorten=True) for line in lines]
