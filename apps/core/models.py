from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from apps.core.prompts import PROMPT_PLACEHOLDERS, validate_template

# The roles whose model may fall back to others; not the embedding, whose vectors from another
# model would not be comparable with the stored ones.
FALLBACK_ROLES = ("chat", "reflection", "critic", "episode", "title", "router")


def fallback_entry(entry: str) -> tuple[str, str]:
    """(endpoint, model) of one entry of a fallback chain: "model" (endpoint "": the role's own)
    or "http://host:port/v1 model"; ValueError when it is neither."""
    words = entry.split()
    if len(words) == 1 and not _is_url(words[0]):
        return "", words[0]
    if len(words) == 2 and _is_url(words[0]) and not _is_url(words[1]):
        return words[0].rstrip("/"), words[1]
    raise ValueError(
        f"{entry!r} is neither a model nor an endpoint and a model (http://host:port/v1 model)"
    )


def _is_url(word: str) -> bool:
    parts = urlsplit(word)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def fallback_problems(fallbacks: object) -> list[str]:
    """What is wrong with a `model_fallbacks` value: {role: ["model", "url model", ...]}."""
    if not isinstance(fallbacks, dict):
        return ["The fallbacks must be a mapping of role to a list of models."]
    problems = []
    for role, entries in fallbacks.items():
        if role not in FALLBACK_ROLES:
            problems.append(
                f"{role!r} cannot fall back: the roles that can are {', '.join(FALLBACK_ROLES)}."
            )
        elif not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            problems.append(f"The {role} fallbacks must be a list of models.")
        else:
            for entry in entries:
                try:
                    fallback_entry(entry)
                except ValueError as exc:
                    problems.append(f"{role}: {exc}.")
    return problems


class RuntimeConfig(models.Model):
    """The one row of settings an admin changes at run time; read through `runtime_config()`."""

    class Language(models.TextChoices):
        ENGLISH = "en", "English"
        ITALIAN = "it", "Italiano"
        GERMAN = "de", "Deutsch"
        FRENCH = "fr", "Français"
        SPANISH = "es", "Español"

    llm_base_url = models.URLField(
        blank=True, help_text="Blank: THALAMUS_LLM_BASE_URL from the environment."
    )
    chat_model = models.CharField(max_length=200, blank=True, help_text="Blank: from the env.")
    critic_model = models.CharField(max_length=200, blank=True, help_text="Blank: chat model.")
    # Background roles may run on another server or a smaller model, so they never queue behind
    # the chat on a one-slot local server.
    reflection_base_url = models.URLField(blank=True, help_text="Blank: the chat's endpoint.")
    reflection_model = models.CharField(max_length=200, blank=True, help_text="Blank: chat model.")
    critic_base_url = models.URLField(blank=True, help_text="Blank: the chat's endpoint.")
    episode_base_url = models.URLField(blank=True, help_text="Blank: the chat's endpoint.")
    episode_model = models.CharField(max_length=200, blank=True, help_text="Blank: chat model.")
    title_base_url = models.URLField(blank=True, help_text="Blank: the chat's endpoint.")
    title_model = models.CharField(max_length=200, blank=True, help_text="Blank: chat model.")
    # The world modifier's model: a short structured call after the answer; a small fast model
    # is enough.
    router_model_enabled = models.BooleanField(
        default=False,
        help_text="After the answer, also show the world modifier's model a personal message no "
        "rule places (one more background LLM call for such a turn). Off: only a message the "
        "rules see changing the world state is shown to it.",
    )
    router_base_url = models.URLField(blank=True, help_text="Blank: the chat's endpoint.")
    router_model = models.CharField(max_length=200, blank=True, help_text="Blank: chat model.")
    router_timeout_seconds = models.PositiveIntegerField(
        default=20,
        validators=[MinValueValidator(1), MaxValueValidator(600)],
        help_text="How long one round of the tool loop before the answer may take; past it "
        "the turn is answered with what was gathered.",
    )
    tool_rounds = models.PositiveIntegerField(
        default=3,
        validators=[MaxValueValidator(10)],
        help_text="At most this many rounds of tool calls before the answer. 0: no tools.",
    )
    tool_timeout_seconds = models.FloatField(
        default=5.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(120)],
        help_text="How long one tool call (a memory search, the chat history) may take.",
    )
    embed_model = models.CharField(max_length=200, blank=True, help_text="Blank: from the env.")
    # llama.cpp's server serves one model: its embedding model then runs as a second server.
    embed_base_url = models.URLField(
        blank=True,
        help_text="The server embeddings are asked from. Blank: THALAMUS_EMBED_BASE_URL from the "
        "environment, else the chat's endpoint.",
    )
    # {role: ["model", "http://host:port/v1 model", ...]}: tried in order when the role's own
    # model fails (unreachable, too slow, not found, a server error).
    model_fallbacks = models.JSONField(
        default=dict,
        blank=True,
        help_text="Per role, the models tried in order when its own fails (unreachable, timed "
        "out, HTTP 404 or 5xx): one a line, a model on the role's server or an endpoint and a "
        "model (http://host:port/v1 model).",
    )
    # The chat's model picker offers what the chat's server lists (apps/core/llm/chat_models.py);
    # the admin may narrow it.
    allowed_chat_models = models.TextField(
        blank=True,
        help_text="The models a user may pick for a conversation, one a line; each must also be "
        "listed by the chat's server. Blank: every chat model it lists (never an embedding "
        "model). The chat model above is always offered.",
    )
    temperature = models.FloatField(
        default=0.7,
        validators=[MinValueValidator(0.0), MaxValueValidator(2.0)],
        help_text="The chat's sampling temperature: 0 answers alike each time, higher varies more.",
    )
    short_term_window = models.PositiveIntegerField(
        default=20,
        validators=[MinValueValidator(1), MaxValueValidator(200)],
        help_text="How many recent messages go into the prompt, at most. Past it, the start "
        "moves on by half of it at a time, so that the server's prompt cache keeps the "
        "conversation.",
    )
    max_memory_results = models.PositiveIntegerField(
        default=8,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="How many memories a turn's search puts into the prompt, and the critic "
        "weighs against a reply, at most.",
    )
    context_tokens = models.PositiveIntegerField(
        default=4096,
        validators=[MinValueValidator(512), MaxValueValidator(2_000_000)],
        help_text="A model's context window, in tokens, when its server does not report one "
        "(llama.cpp /props, Ollama /api/show and vLLM's /v1/models do).",
    )
    answer_max_tokens = models.PositiveIntegerField(
        default=1024,
        validators=[MinValueValidator(16), MaxValueValidator(100_000)],
        help_text="The longest answer, in tokens; a longer one stops there with a Continue button.",
    )
    background_max_tokens = models.PositiveIntegerField(
        default=1024,
        validators=[MinValueValidator(64), MaxValueValidator(100_000)],
        help_text="The longest reply of a reflection, critique or episode call, in tokens.",
    )
    background_timeout_seconds = models.PositiveIntegerField(
        default=180,
        validators=[MinValueValidator(5), MaxValueValidator(1800)],
        help_text="How long one background LLM call may take.",
    )
    background_wait_seconds = models.PositiveIntegerField(
        default=120,
        validators=[MaxValueValidator(3600)],
        help_text="How long a background call waits while an answer streams from the same "
        "endpoint (a local server answers one request at a time). 0: never waits.",
    )
    # Reflection runs over a conversation's waiting turns at once: one call, and none while the
    # user is still typing the next message.
    reflection_quiet_seconds = models.PositiveIntegerField(
        default=20,
        validators=[MaxValueValidator(3600)],
        help_text="Reflection starts once a conversation has had no new message for this long, "
        "over every turn of it not yet reflected on, in one call; the conversation's title is "
        "asked for then too, and background work the chat interrupted runs again. "
        "0: after each reply.",
    )
    reflection_every_turns = models.PositiveIntegerField(
        default=4,
        validators=[MinValueValidator(1), MaxValueValidator(50)],
        help_text="…or once this many turns of a conversation wait for reflection, even while "
        "the user goes on chatting.",
    )
    weight_vector = models.FloatField(
        default=0.45,
        validators=[MinValueValidator(0.0)],
        help_text="How much a memory's vector similarity to the message counts in its score.",
    )
    weight_text = models.FloatField(
        default=0.6,
        validators=[MinValueValidator(0.0)],
        help_text="How much matching the message's words (full-text search) counts.",
    )
    weight_recency = models.FloatField(
        default=0.1,
        validators=[MinValueValidator(0.0)],
        help_text="How much a recently used or made memory counts over an old one.",
    )
    weight_importance = models.FloatField(
        default=0.1,
        validators=[MinValueValidator(0.0)],
        help_text="How much the importance reflection gave a memory counts.",
    )
    weight_confidence = models.FloatField(
        default=0.1,
        validators=[MinValueValidator(0.0)],
        help_text="How much a memory's confidence (confirmations less doubts) counts.",
    )
    weight_context = models.FloatField(
        default=0.7,
        validators=[MinValueValidator(0.0), MaxValueValidator(10.0)],
        help_text="How much a memory also scores for its best neighbour (0 ranks each alone).",
    )
    neighbour_seconds = models.PositiveIntegerField(
        default=60,
        validators=[MaxValueValidator(86_400)],
        help_text="Memories made this close together count as neighbours (one exchange).",
    )
    promotion_threshold = models.IntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="The confidence at which a volatile memory is promoted to long-term.",
    )
    minimum_score = models.IntegerField(
        default=1,
        validators=[MinValueValidator(-100), MaxValueValidator(100)],
        help_text="A volatile memory below this confidence decays even if it was confirmed; "
        "below the promotion threshold.",
    )
    decay_hours = models.PositiveIntegerField(
        default=72,
        validators=[MinValueValidator(1)],
        help_text="An unconfirmed volatile memory nobody used for this long, or a held one "
        "left unapproved, is forgotten.",
    )
    episode_idle_minutes = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1)],
        help_text="A conversation quiet for this long is summarised into an episode.",
    )
    batch_size = models.PositiveIntegerField(
        default=200,
        validators=[MinValueValidator(1), MaxValueValidator(10_000)],
        help_text="How many memories, conversations or episodes one scheduled pass takes, at most.",
    )
    link_similarity = models.FloatField(
        default=0.6,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Cosine similarity at which two memories are linked.",
    )
    duplicate_similarity = models.FloatField(
        default=0.92,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text=(
            "Cosine similarity at which two memories count as one said twice: promotion merges "
            "them, and a new memory with the same words in any order confirms the one held "
            "(similarity alone never merges a new one)."
        ),
    )
    link_neighbours = models.PositiveIntegerField(
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="How many similar long-term memories a promoted memory is compared with.",
    )
    max_message_chars = models.PositiveIntegerField(
        default=32_000,
        validators=[MinValueValidator(1), MaxValueValidator(1_000_000)],
        help_text="The longest message a user may send, in characters.",
    )
    turns_per_minute = models.PositiveIntegerField(
        default=20,
        validators=[MaxValueValidator(1000)],
        help_text="How many messages one user may send per minute, over all their "
        "conversations. 0: no limit.",
    )
    reflection_enabled = models.BooleanField(
        default=True,
        help_text="Reflect on conversations to write memories. Off: nothing new is remembered.",
    )
    critic_enabled = models.BooleanField(
        default=True,
        help_text="After each reply, judge the memories the turn touched against what is "
        "known, and raise or lower their confidence.",
    )
    debate_enabled = models.BooleanField(
        default=False,
        help_text="When rules or preferences bear on a turn, draft the answer, review it "
        "against them and rewrite it if it breaks one (more LLM calls; the answer then "
        "streams later).",
    )
    renderer_language = models.CharField(
        max_length=2,
        choices=Language.choices,
        default=Language.ENGLISH,
        help_text="The language what memory knows is written in for the prompt, unless a user "
        "picked their own.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "runtime configuration"
        verbose_name_plural = "runtime configuration"

    def __str__(self) -> str:
        return "Runtime configuration"

    def clean(self) -> None:
        weights = (
            self.weight_vector,
            self.weight_text,
            self.weight_recency,
            self.weight_importance,
            self.weight_confidence,
        )
        if sum(weights) <= 0:
            raise ValidationError("At least one retrieval weight must be above zero.")
        if self.link_similarity > self.duplicate_similarity:
            raise ValidationError(
                {"duplicate_similarity": "Merging must need at least the linking similarity."}
            )
        if self.minimum_score >= self.promotion_threshold:
            raise ValidationError(
                {"minimum_score": "The minimum score must be below the promotion threshold."}
            )
        problems = fallback_problems(self.model_fallbacks)
        if problems:
            raise ValidationError({"model_fallbacks": problems})


class Event(models.Model):
    """The durable stream of consciousness: one row per step the mind takes."""

    class Kind(models.TextChoices):
        PERCEPTION = "perception", "Perception"
        CRITIQUE = "critique", "Critique"
        DEBATE = "debate", "Internal debate"
        PROMOTION = "promotion", "Promotion"
        LINK = "link", "Link"
        DECAY = "decay", "Decay"
        EPISODE = "episode", "Episode"
        EDIT = "edit", "Edit"
        TURN = "turn", "Turn"
        ERROR = "error", "Error"
        WARNING = "warning", "Warning"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="events",
    )
    kind = models.CharField(max_length=16, choices=Kind.choices, db_index=True)
    summary = models.CharField(max_length=500)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "-created_at"], name="event_owner_recent")]

    def __str__(self) -> str:
        return f"{self.kind}: {self.summary[:60]}"


class PromptOverride(models.Model):
    """An admin's replacement for one prompts/<name>.txt; deleting it reverts to the file."""

    name = models.CharField(max_length=100, unique=True)
    text = models.TextField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.name not in PROMPT_PLACEHOLDERS:
            raise ValidationError({"name": f"There is no prompt template called {self.name!r}."})
        problems = validate_template(self.name, self.text)
        if problems:
            raise ValidationError(
                {"text": [problem[0].upper() + problem[1:] for problem in problems]}
            )
