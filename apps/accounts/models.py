from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.core.categories import Category
from apps.core.models import RuntimeConfig


class ApiKey(models.Model):
    """A bearer key for the OpenAI-compatible API; only the SHA-256 of the secret is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=8, unique=True)
    hashed_key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"
        indexes = [models.Index(fields=["user", "-created_at"], name="apikey_user_recent")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


# What reflection may learn: the knowledge graph's categories.
LEARNABLE_CATEGORIES = Category.choices


def all_learnable_categories() -> list[str]:
    return [value for value, _ in LEARNABLE_CATEGORIES]


def default_time_zone() -> str:
    return settings.TIME_ZONE


class Theme(models.TextChoices):
    SYSTEM = "system", "System"
    LIGHT = "light", "Light"
    DARK = "dark", "Dark"


class UserSettings(models.Model):
    """One user's choices for their turns: memory on or off, custom instructions, the language
    of the knowledge block, what reflection may learn, their time zone, the page theme."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="thalamus_settings"
    )
    # Off: the turn reads no memory and reflection learns nothing.
    memory_enabled = models.BooleanField(default=True)
    about_me = models.TextField(blank=True, max_length=2000)
    answer_style = models.TextField(blank=True, max_length=2000)
    # Blank: the site's (RuntimeConfig.renderer_language).
    knowledge_language = models.CharField(
        max_length=2, blank=True, choices=RuntimeConfig.Language.choices
    )
    learn_categories = models.JSONField(default=all_learnable_categories, blank=True)
    time_zone = models.CharField(max_length=64, default=default_time_zone)
    # False until the user picks a zone on the settings page or their browser's is taken on a
    # page view (apps/accounts/views.py time_zone_detect); only then is the default replaced.
    time_zone_chosen = models.BooleanField(default=False)
    theme = models.CharField(max_length=6, choices=Theme.choices, default=Theme.SYSTEM)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "user settings"
        verbose_name_plural = "user settings"

    def __str__(self) -> str:
        return f"settings of user {self.user_id}"


class AdminViewing(models.Model):
    """An admin looked at another user's memories (their Mind page, or memory rows in the
    admin); the user reads it on their settings page."""

    class Place(models.TextChoices):
        MIND = "mind", "your Mind page"
        ADMIN = "admin", "your memories in the admin"

    viewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="admin_viewings"
    )
    place = models.CharField(max_length=5, choices=Place.choices)
    viewed_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "-viewed_at"], name="adminviewing_owner_recent")]

    def __str__(self) -> str:
        return f"user {self.viewer_id} viewed {self.place} of user {self.owner_id}"
