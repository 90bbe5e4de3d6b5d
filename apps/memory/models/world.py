"""What reflection leaves for the next turns: the user's world state (what the talk is about,
how to answer) and a conversation's retrieval plan."""

from __future__ import annotations

from django.conf import settings
from django.db import models

# What the world state holds at most: it is rendered into every system prompt.
WORLD_MAX_TOPICS = 8
WORLD_MAX_GOALS = 10
WORLD_MAX_BEHAVIOUR = 10
WORLD_MAX_CHARS = 200


class WorldState(models.Model):
    """What the conversation with one user is about now and how they want to be answered.

    Changed only through `world_apply`'s validated operations; `version` counts its changes.
    """

    LIMITS = {
        "topics": WORLD_MAX_TOPICS,
        "goals": WORLD_MAX_GOALS,
        "behaviour": WORLD_MAX_BEHAVIOUR,
    }

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="world_state"
    )
    topics = models.JSONField(default=list, blank=True, help_text="What the talk is about now.")
    project = models.CharField(max_length=WORLD_MAX_CHARS, blank=True)
    goals = models.JSONField(default=list, blank=True)
    behaviour = models.JSONField(
        default=list, blank=True, help_text="How the user wants the assistant to answer."
    )
    # The items (of any part) the model proposed rather than a person wrote by hand: data,
    # which the answer's prompt shows datamarked in its memory note, never as the world state.
    proposed = models.JSONField(default=list, blank=True)
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"World state of user {self.owner_id} (v{self.version})"

    @property
    def is_empty(self) -> bool:
        return not (self.topics or self.project or self.goals or self.behaviour)

    def as_dict(self) -> dict:
        return {
            "topics": list(self.topics),
            "project": self.project,
            "goals": list(self.goals),
            "behaviour": list(self.behaviour),
        }


class RetrievalPlan(models.Model):
    """What to retrieve on the conversation's next turn; written by reflection."""

    conversation = models.OneToOneField(
        "chat.Conversation", on_delete=models.CASCADE, related_name="retrieval_plan"
    )
    steps = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Retrieval plan of conversation {self.conversation_id}"
