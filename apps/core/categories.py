"""The knowledge graph's categories: one enumeration for memory (what a fact is about) and
accounts (which of them a user lets reflection learn), which sits below memory."""

from __future__ import annotations

from django.db import models


class Category(models.TextChoices):
    """Ontological categories of the knowledge graph, in the order the renderer shows them."""

    IDENTITY = "identity", "Identity"
    RELATIONSHIPS = "relationships", "Relationships"
    PLACES = "places", "Places"
    WORK = "work", "Work and studies"
    SKILLS = "skills", "Skills"
    PREFERENCES = "preferences", "Preferences"
    GOALS = "goals", "Goals"
    HEALTH = "health", "Health"
    EXPERIENCES = "experiences", "Experiences"
    KNOWLEDGE = "knowledge", "General knowledge"
