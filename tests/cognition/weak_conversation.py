"""The weak-model conversation of test_weak_local_model, also replayed by bench.weak_model.

Plain data and the stub's script for it, free of Django, so a benchmark's stub process can
load it.
"""

from __future__ import annotations

CONTEXT = 4096
TOKENS_PER_SECOND = 26.0
ANSWER_CAP = 40
BACKGROUND_CAP = 96

LOG = "\n".join(
    f"2026-11-23 10:{n // 60:02d}:{n % 60:02d} worker-{n % 7} handled job {n} in {n % 97} ms"
    for n in range(120)
)
# (the user's message, the fact it states or None, what the assistant says)
TURNS = [
    ("Hi there!", None, None),
    ("My name is Ada Lovelace. What can you do?", "My name is Ada Lovelace", None),
    ("I live in Turin, near the river. Is it cold there now?", "I live in Turin", None),
    (
        "I work as a firmware engineer. Any tips for debugging?",
        "I work as a firmware engineer",
        None,
    ),
    (
        "I prefer short answers without emoji. How do I read a core dump?",
        "I prefer short answers without emoji",
        "You should install the GNU debugger and keep every core dump for a week.",
    ),
    ("My dog is called Pixel. Do dogs like snow?", "My dog is called Pixel", None),
    (
        "I maintain the build farm at work. Here is a log of last night:\n" + LOG,
        "I maintain the build farm at work",
        None,
    ),
    ("Thanks, that helps.", None, None),
    ("I am learning Rust in the evenings. Where should I start?", "I am learning Rust", None),
    (
        "My favourite food is risotto. Can you suggest a wine?",
        "My favourite food is risotto",
        "A dry Barbera from Piedmont goes well with a creamy mushroom risotto.",
    ),
    ("I have two children, Marco and Lia. Ideas for a weekend?", "I have two children", None),
    ("I run every Sunday morning. Is that enough exercise?", "I run every Sunday morning", None),
]


# The most replies one reflection call takes (2 × reflection_every_turns, shipped 4).
REPLIES_PER_CALL = 8


def _reflection(start: int) -> dict:
    """The weak model's quotes for a reflection over the turns from `start` on: each turn's
    fact, and where the assistant gave advice, that advice taken for the user's words."""
    quotes = {}
    for offset, (_, fact, answer) in enumerate(TURNS[start : start + REPLIES_PER_CALL]):
        said = [fact] if fact is not None else []
        if answer is not None:
            said.append(answer[:120])
        quotes[f"message_{offset + 1}"] = said
    return quotes


def script(llm_stub, tps: float = TOKENS_PER_SECOND) -> None:
    """Queue the scripted answers and reflections on a StubServer, generated at `tps`. A
    reflection takes the turns not yet reflected on, so one is scripted for each turn a
    reflection may start at (its first message)."""
    for start, (message, _, answer) in enumerate(TURNS):
        if answer is not None:
            llm_stub.script({"content": answer, "match": message[:30], "tps": tps})
        llm_stub.script(
            {
                "json": _reflection(start),
                "match": f"message_1: {message[:30]}",
                "tps": tps,
                # Asked again after giving way to an answer: the same reflection.
                "resend": True,
            }
        )
