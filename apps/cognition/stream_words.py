"""What the background steps say in the mind stream: a step that could not finish, and what
reflecting on a message did."""

from __future__ import annotations

from apps.core.models import Event
from apps.core.services import event_record

# The background steps, as the mind stream names them to the user.
STEP_WORDS = {
    "reflection": "learning from a message",
    "critique": "checking a memory",
    "episode": "summing up a conversation",
}


def error_record(*, owner, step: str, message_id: int | None, error: str) -> Event:
    return event_record(
        kind=Event.Kind.ERROR,
        summary=f"I could not finish {STEP_WORDS.get(step, step)}: {error}",
        owner=owner,
        payload={"step": step, "message_id": message_id, "error": error[:2000]},
    )


def _things(count: int) -> str:
    return f"{count} new thing{'s' if count != 1 else ''}"


def perception_sentence(outcome: dict) -> str:
    """What reflecting on a message did, as the user reads it in the mind stream: "Learned 2
    new things about you.", "Read your last message; nothing new to remember." """
    created, updated = len(outcome["created"]), len(outcome["updated"])
    confirmed = len(outcome.get("confirmed") or [])
    held = len(outcome.get("quarantined") or [])
    proposed = len(outcome.get("proposed") or [])
    done = []
    if created:
        done.append(f"learned {_things(created)} about you")
    if updated:
        done.append(f"updated {updated} thing{'s' if updated != 1 else ''} I knew")
    if confirmed:
        done.append(f"confirmed {confirmed} thing{'s' if confirmed != 1 else ''} I knew")
    if held:
        reads = "reads" if held == 1 else "read"
        done.append(f"set aside {held} that {reads} like an order to me, for your approval")
    if proposed:
        changes = "change" if proposed == 1 else "changes"
        done.append(f"asked you about {proposed} {changes} to what I knew")
    if not done:
        return "Read your last message; nothing new to remember."
    sentence = done[0] if len(done) == 1 else ", ".join(done[:-1]) + " and " + done[-1]
    return sentence[0].upper() + sentence[1:] + "."
