"""Output a model runs away with: an answer stuck repeating itself, and chat-template leftovers
(`<|im_end|>user`) in a reply that should be a few plain words.

Pure functions; the answer's streaming loop and the title call use them.
"""

from __future__ import annotations

import re

# A loop is the same block, at least this long and holding two words, repeated at least
# LOOP_COPIES times and covering at least LOOP_MIN_CHARS at the end of the text.
LOOP_MIN_BLOCK = 10
LOOP_COPIES = 3
LOOP_MIN_CHARS = 150
# Only the end of the text is looked at, so a check costs the same however long the answer.
LOOP_TAIL_CHARS = 3000

_WORD = re.compile(r"[^\W\d_]{2,}")


def repeated_tail(text: str) -> int | None:
    """Where the repeats begin when `text` ends in a loop: `text[:index]` keeps the repeated
    block once (to the end of its line, sentence or word). None when it does not.

    The end of the text may be part of a copy (the stream stops anywhere). Rules, dividers and
    rows of numbers repeat without words, and short repeated lines cover too little to count.
    """
    start = max(len(text) - LOOP_TAIL_CHARS, 0)
    tail = text[start:]
    n = len(tail)
    if not _WORD.search(tail):
        return None  # a rule or a divider
    for period in range(LOOP_MIN_BLOCK, n // LOOP_COPIES + 1):
        if tail[-1] != tail[-1 - period]:
            continue  # most periods fail here, without copying anything
        covered = max(LOOP_COPIES * period, LOOP_MIN_CHARS)
        if covered > n or tail[n - covered : n - period] != tail[n - covered + period :]:
            continue
        copy = tail[n - period :]
        if (copy + copy).find(copy, 1) < period:
            continue  # copies of a shorter unit, too short to count, or seen as that unit
        # The text from `begin` on repeats with this period; find where that starts.
        begin = n - covered
        while begin >= period and tail[begin - period : begin] == tail[begin : begin + period]:
            begin -= period
        while begin > 0 and tail[begin - 1] == tail[begin - 1 + period]:
            begin -= 1
        if len(_WORD.findall(tail, begin, begin + period)) < 2:
            continue
        # The first copy ends where a line, a sentence or a word does: "…that.\n", not "…that".
        first_end = begin + period
        for boundary in ("\n", ". ", " "):
            at = tail.find(boundary, first_end - len(boundary), first_end + period - 1)
            if at >= 0:
                return start + at + len(boundary)
        return start + first_end
    return None


TITLE_MAX_CHARS = 80
_ROLES = ("user", "assistant", "model", "system")
# Chat-template tokens (<|im_end|>, <|eot_id|>, <end_of_turn>, </s>, [INST] …) end a turn, so
# they end the title too; a reasoning model's <think> block is no part of it.
_TEMPLATE_TOKEN = re.compile(
    r"<think>.*?(?:</think>|$)|<\|[^|<>]*\|>|</?s>|\[/?INST\]|<(?:start|end)_of_turn>",
    re.IGNORECASE | re.DOTALL,
)
_ROLE_LABEL = re.compile(rf"^(?:{'|'.join(_ROLES)})\s*:\s*", re.IGNORECASE)
_TITLE_LABEL = re.compile(r"^title\s*:\s*", re.IGNORECASE)
# A lowercase role word after the title's last punctuation: the next turn's header, whose
# template token the server left out ("Trip to Rome. user").
_TRAILING_ROLE = re.compile(rf"(?<=[.!?:;|])\s*(?:{'|'.join(_ROLES)})$")
_MARKUP = "#*_`\"'“”‘’«»"


def clean_title(text: str) -> str:
    """The title in an LLM's reply, without template tokens, role names, Markdown or quotes;
    "" when nothing worth a title is left (the caller then uses the user's first words)."""
    for segment in _TEMPLATE_TOKEN.split(text):
        lines = [line.strip() for line in segment.splitlines() if line.strip(_MARKUP + " \t")]
        if not lines:
            continue
        header = lines[0].lower().rstrip(": ")
        if header in ("user", "system"):
            return ""  # the model wrote on into the next turn; the title was before it
        if header in ("assistant", "model"):
            lines = lines[1:]  # the header of its own turn
            if not lines:
                continue
        return _title_from(lines[0])
    return ""


def _title_from(line: str) -> str:
    title = re.sub(r"[*`]", "", line)  # emphasis and code marks anywhere in it
    for _ in range(3):  # "**Title:** \"…\"" takes a few rounds of peeling
        title = _ROLE_LABEL.sub("", title.strip(_MARKUP + " \t"))
        title = _TITLE_LABEL.sub("", title)
    title = _TRAILING_ROLE.sub("", title).strip(_MARKUP + " \t")
    if len(re.findall(r"[^\W\d_]", title)) < 2:
        return ""
    return _shortened(" ".join(title.split()))


def _shortened(title: str) -> str:
    if len(title) <= TITLE_MAX_CHARS:
        return title
    return title[: TITLE_MAX_CHARS - 1].rsplit(" ", 1)[0].rstrip(",;:-") + "…"
