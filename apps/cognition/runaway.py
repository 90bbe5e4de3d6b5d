"""Output a model runs away with: an answer stuck repeating itself, exactly or nearly, and
chat-template leftovers (`<|im_end|>user`) in a reply that should be a few plain words.

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

# A near loop: copies that each differ a little ("I'm glad to have you here, and I'm happy to
# have you here, too. I'm so glad to have you here…"). In the last NEAR_WORDS words of prose, at
# least NEAR_REPEATED of the word 4-grams were already said there. A list or an explanation
# that explains stays well below (a paragraph on baking bread: 0.05; the loop SmolLM2-135M wrote:
# 0.44). Code, table rows and list items share their shape by nature ("- Monday: go for a run,
# then…"): they are left to the exact check.
NEAR_WORDS = 80
NEAR_GRAM = 4
NEAR_REPEATED = 0.35
# Fewer different words than this is a chant or a column ("ha ha ha", "- milk"), not a loop.
NEAR_MIN_DISTINCT = 8
# Whole words only: "item0007" or "v2" name things; a run of them is a numbered list, not prose
# saying itself again.
_PROSE_WORD = re.compile(r"(?<!\w)[^\W\d_]+(?:['’][^\W\d_]+)?(?!\w)")
_FENCED = re.compile(r"```.*?```", re.DOTALL)
# Table rows, list items, and lines of markup or code outside a fence ("<a href=…>", "x = 1;",
# "[a link](…)", "[r]: …").
_NOT_PROSE = re.compile(
    r"(?m)^[ \t]*(?:\||[-*+•]\s|\d+[.)]\s|\[[^\]]*\]:).*$|^.*(?:[<>{};=].*[<>{};=]|\]\().*$"
)
_SENTENCE_END = re.compile(r"[.!?…](?=\s)|\n")


def repeated_tail(text: str) -> int | None:
    """Where the repeats begin when `text` ends in a loop, exact or near: `text[:index]` keeps
    the repeated block once (to the end of its line, sentence or word). None when it does not."""
    exact = _exact_loop(text)
    return exact if exact is not None else _near_loop(text)


def _exact_loop(text: str) -> int | None:
    """The end of the first copy when the text ends in copies of one block.

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


def _blank(match: re.Match) -> str:
    return " " * len(match.group())


def _near_loop(text: str) -> int | None:
    """The end of the sentence where the repeating begins, when the prose at the end of the
    text mostly says again what it said just before (`NEAR_REPEATED`)."""
    start = max(len(text) - LOOP_TAIL_CHARS, 0)
    tail = text[start:]
    if tail.count("```") % 2:
        return None  # inside a code block
    # Code, table rows and list items are blanked, keeping the offsets.
    tail = _NOT_PROSE.sub(_blank, _FENCED.sub(_blank, tail))
    words = list(_PROSE_WORD.finditer(tail))[-NEAR_WORDS:]
    if len(words) < NEAR_WORDS:
        return None
    said = [word.group().casefold().replace("’", "'") for word in words]
    if len(set(said)) < NEAR_MIN_DISTINCT:
        return None
    grams = [tuple(said[i : i + NEAR_GRAM]) for i in range(len(said) - NEAR_GRAM + 1)]
    seen: set[tuple[str, ...]] = set()
    first_repeat = None
    repeated = 0
    for index, gram in enumerate(grams):
        if gram in seen:
            repeated += 1
            first_repeat = index if first_repeat is None else first_repeat
        seen.add(gram)
    if repeated < NEAR_REPEATED * len(grams):
        return None
    # The sentence in which the saying again starts is kept whole; the rest goes.
    at = words[first_repeat].start()
    end = _SENTENCE_END.search(tail, at)
    cut = end.end() if end is not None else words[first_repeat].start()
    return start + cut


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
