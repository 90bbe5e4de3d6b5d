"""What the "What I used" panel names: the texts behind the ids an answer's trace keeps.

A trace stores ids and scores, never the texts themselves, so forgetting a memory takes it out
of every past answer's panel too; the texts are read as the panel is shown (one query per
kind for a whole conversation page).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Q

from apps.chat.models import Message
from apps.language.text import letter_words
from apps.memory.models import Episode, MemoryNode, Triple
from apps.memory.renderer import knowledge_line


@dataclass
class Recalled:
    """Texts by id of what answers recalled, visible to the conversation's owner."""

    memories: dict[int, str]
    episodes: dict[int, str]
    triples: dict[int, str]
    # Each triple's value ("Ghent"), to tell a fact that only restates a memory it sits beside.
    triple_values: dict[int, str] = field(default_factory=dict)
    # Global rules: instructions to the assistant ("trust the user"), not facts to show anyone.
    instructions: frozenset[int] = frozenset()


def _ids(messages: Iterable[Message], kind: str) -> set[int]:
    return {
        item["id"]
        for message in messages
        for item in ((message.trace or {}).get("memory") or {}).get(kind) or []
        if "id" in item
    }


def recalled_texts(*, conversation_id: int, messages: Iterable[Message]) -> Recalled:
    """The texts the answers of conversation `conversation_id` recalled: its owner's or global."""
    messages = list(messages)
    own_or_global = Q(owner__conversations=conversation_id) | Q(owner__isnull=True)
    # Current memories only: one marked wrong or forgotten since no longer shows.
    memories = MemoryNode.objects.filter(
        own_or_global, pk__in=_ids(messages, "memories"), valid_to=None
    )
    episodes = Episode.objects.filter(
        owner__conversations=conversation_id, pk__in=_ids(messages, "episodes")
    )
    triples = list(
        Triple.objects.filter(own_or_global, pk__in=_ids(messages, "triples")).select_related(
            "predicate"
        )
    )
    memories = list(memories.values_list("pk", "description", "owner_id", "kind"))
    return Recalled(
        memories={pk: text for pk, text, _, _ in memories},
        episodes=dict(episodes.values_list("pk", "summary")),
        triples={
            triple.pk: knowledge_line(triple=triple, language="en").removeprefix("- ")
            for triple in triples
        },
        triple_values={triple.pk: triple.object for triple in triples},
        instructions=frozenset(
            pk
            for pk, _, owner_id, kind in memories
            if owner_id is None and kind == MemoryNode.Kind.RULE
        ),
    )


@dataclass
class Used:
    """One thing an answer recalled, as its panel shows it: the text, why it was chosen in
    words, and the score behind it (for the panel's details)."""

    text: str
    why: str
    score: float | None


# A memory this close in meaning (the cosine of the two vectors) is "similar in meaning".
SIMILAR_MEANING = 0.5
# Recency halves every RECENCY_HALF_LIFE_DAYS: above this, it was made or used in the last days.
RECENT = 0.8
# Words too common to say a memory was chosen for them.
_COMMON = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "your",
        "yours",
        "with",
        "this",
        "that",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "how",
        "was",
        "were",
        "have",
        "has",
        "had",
        "its",
        "it's",
        "i'm",
        "i've",
        "don't",
        "can",
        "could",
        "would",
        "should",
        "will",
        "from",
        "into",
        "about",
        "there",
        "their",
        "they",
        "them",
        "then",
        "than",
        "just",
        "also",
        "very",
        "some",
        "any",
        "all",
        "our",
        "out",
        "get",
        "got",
        "like",
        "tell",
        "know",
        "does",
        "did",
        "one",
        "two",
    ]
)


def _words(text: str) -> dict[str, str]:
    """The words of a text worth naming, lower case, each with its first spelling."""
    words: dict[str, str] = {}
    for word in letter_words(text):
        key = word.lower()
        if len(key) >= 3 and key not in _COMMON and not key.isdigit():
            words.setdefault(key, word)
    return words


def _why(item: dict, text: str, said: dict[str, str], *, kind: str) -> str:
    """Why recall chose it, from its trace's scores: the user's words it shares, its meaning,
    its neighbours, its age."""
    components = item.get("components") or {}
    reasons = []
    shared = [said[word] for word in _words(text) if word in said][:3]
    if shared:
        reasons.append("matched your words " + ", ".join(f"“{word}”" for word in shared))
    elif components.get("text", 0) > 0:
        reasons.append("matched words of your message")
    if components.get("vector", 0) >= SIMILAR_MEANING:
        reasons.append("similar in meaning to your message")
    if not reasons and item.get("context", 0) > 0:
        reasons.append("said together with another memory that matched")
    if components.get("recency", 0) >= RECENT:
        reasons.append("recent")
    if not reasons:
        reasons.append(
            "one of the best matches I had" if kind == "memories" else "the closest I had"
        )
    if item.get("global"):
        reasons.append("shared knowledge, not a memory of yours")
    why = "; ".join(reasons)
    return why[0].upper() + why[1:]


def panel_items(trace: dict, recalled: Recalled, said: str = "") -> dict[str, list[Used]]:
    """What one answer used, per kind, with why, leaving out what has been forgotten since;
    `said` is the user's message it answered."""
    memory = trace.get("memory") or {}
    said_words = _words(said)
    found = {}
    for kind, texts in (("memories", recalled.memories), ("episodes", recalled.episodes)):
        found[kind] = [
            Used(
                texts[item["id"]],
                _why(item, texts[item["id"]], said_words, kind=kind),
                item.get("score"),
            )
            for item in memory.get(kind) or []
            if item.get("id") in texts
        ]
    found["triples"] = [
        Used(
            recalled.triples[item["id"]],
            "Shared knowledge" if item.get("global") else "A fact I keep about you",
            None,
        )
        for item in memory.get("triples") or []
        if item.get("id") in recalled.triples
    ]
    return found
