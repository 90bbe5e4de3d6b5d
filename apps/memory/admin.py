"""The curator's editor: every memory table, with actions that go through the services."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Q
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from pgvector.django import CosineDistance

from apps.accounts.viewings import RecordsAdminViewings
from apps.core.admin_labels import LabelledInlineFormSet, LabelledSplitDateTimes
from apps.memory import browser_services, services, world_services
from apps.memory.forms import WorldStateAdminForm
from apps.memory.models import (
    Critique,
    Episode,
    MemoryLink,
    MemoryNode,
    Predicate,
    Triple,
    WorldState,
)
from apps.memory.templatetags.memory_format import percent

SIMILAR_LIMIT = 20


class OwnerFilter(admin.SimpleListFilter):
    """Owner: global knowledge or one user (by id, so the filter costs no user query)."""

    title = "owner"
    parameter_name = "owner"

    def lookups(self, request, model_admin):
        choices = [("global", "Global knowledge"), ("users", "Any user")]
        if self.value() not in (None, "global", "users"):
            choices.append((self.value(), f"User #{self.value()}"))
        return choices

    def queryset(self, request, queryset):
        if self.value() == "global":
            return queryset.filter(owner=None)
        if self.value() == "users":
            return queryset.exclude(owner=None)
        if self.value():
            return queryset.filter(owner_id=self.value())
        return queryset


class ConfidenceFilter(admin.SimpleListFilter):
    title = "confidence"
    parameter_name = "confidence"
    RANGES = {
        "negative": ("below 0", Q(confidence_score__lt=0)),
        "low": ("0 to 2", Q(confidence_score__gte=0, confidence_score__lte=2)),
        "medium": ("3 to 5", Q(confidence_score__gte=3, confidence_score__lte=5)),
        "high": ("6 or more", Q(confidence_score__gte=6)),
    }

    def lookups(self, request, model_admin):
        return [(key, label) for key, (label, _) in self.RANGES.items()]

    def queryset(self, request, queryset):
        if self.value() in self.RANGES:
            return queryset.filter(self.RANGES[self.value()][1])
        return queryset


class CurrentFilter(admin.SimpleListFilter):
    title = "validity"
    parameter_name = "current"

    def lookups(self, request, model_admin):
        return [("yes", "Current"), ("no", "Superseded")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(valid_to=None)
        if self.value() == "no":
            return queryset.exclude(valid_to=None)
        return queryset


class SimilarToFilter(admin.SimpleListFilter):
    """`?similar_to=<id>`: the nearest memories of the same owner, set by the action below."""

    title = "similar to"
    parameter_name = "similar_to"

    def lookups(self, request, model_admin):
        if self.value():
            return [(self.value(), f"Memory #{self.value()}")]
        return []

    def queryset(self, request, queryset):
        node = _similar_to(request)
        if not self.value():
            return queryset
        if node is None:
            return queryset.none()
        nearest = (
            MemoryNode.objects.filter(owner_id=node.owner_id, embedding__isnull=False)
            .exclude(pk=node.pk)
            .order_by(CosineDistance("embedding", node.embedding))
            .values("pk")[:SIMILAR_LIMIT]
        )
        return queryset.filter(pk__in=nearest)


def _similar_to(request) -> MemoryNode | None:
    """The memory named by `?similar_to=`, fetched once per request."""
    if not hasattr(request, "_similar_to_node"):
        pk = request.GET.get("similar_to", "")
        node = MemoryNode.objects.filter(pk=pk).first() if pk.isdigit() else None
        request._similar_to_node = node if node is not None and node.embedding is not None else None
    return request._similar_to_node


def _provenance(message) -> str:
    if message is None:
        return "-"
    url = reverse("chat:conversation", args=[message.conversation_id]) + f"#msg-{message.pk}"
    return format_html('<a href="{}">message #{}</a>', url, message.pk)


class LinkInline(admin.TabularInline):
    model = MemoryLink
    fk_name = "source"
    formset = LabelledInlineFormSet
    extra = 0
    raw_id_fields = ["target"]
    fields = ["kind", "target", "score", "created_at"]
    readonly_fields = ["created_at"]
    verbose_name = "link to another memory"
    verbose_name_plural = "links to other memories"


class CritiqueInline(admin.StackedInline):
    model = Critique
    extra = 0
    can_delete = False
    fields = ["created_at", "verdict", "delta", "model", "debate", "message"]
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


# What an admin curating a memory needs to know of its kind, confidence and importance.
NODE_FIELD_HELP = {
    "kind": "Fact: something true of the user or the world (“lives in Ghent”). Persona: who "
    "someone is, the user or Thalamus itself. Preference: what the user likes or wants. Rule: "
    "how the assistant must answer; rules and preferences are what the answer review checks "
    "against. Concept: general knowledge, no one's in particular.",
    "confidence_score": "Votes: confirmations and the critic's verdicts, less doubts. The pages "
    "show it in percent: 1 (new) is 33%, 2 is 50%, 3 is 60%, 4 is 67%.",
    "importance": "From 0 to 1, how much the memory counts in a turn's search besides how well "
    "it matches (the runtime configuration's importance weight): 0.5 is ordinary; "
    "reflection gives names, family and the like up to 0.8.",
}


@admin.register(MemoryNode)
class MemoryNodeAdmin(LabelledSplitDateTimes, RecordsAdminViewings, admin.ModelAdmin):
    list_display = [
        "short_description",
        "owner",
        "kind",
        "state",
        "source",
        "confidence_shown",
        "importance",
        "created_at",
        "is_current",
        "similarity",
    ]
    list_filter = [
        SimilarToFilter,
        OwnerFilter,
        "state",
        "kind",
        "source",
        ConfidenceFilter,
        CurrentFilter,
        "embedding_status",
        "created_at",
    ]
    list_select_related = ["owner"]
    search_fields = ["description", "topic", "fact_key", "quote"]
    autocomplete_fields = ["owner"]
    raw_id_fields = ["source_message", "superseded_by"]
    date_hierarchy = "created_at"
    show_full_result_count = False
    inlines = [LinkInline, CritiqueInline]
    actions = ["similar_to_this", "promote", "forget", "reembed", "criticise_now"]
    fieldsets = [
        (None, {"fields": ["owner", "description", "kind", "topic", "fact_key"]}),
        ("Belief", {"fields": ["state", "confidence_score", "importance"]}),
        (
            "Provenance",
            {
                "fields": [
                    "source",
                    "quote",
                    "origin_context",
                    "source_message",
                    "source_link",
                    "created_at",
                    "last_accessed_at",
                    "valid_to",
                    "superseded_by",
                ]
            },
        ),
        ("Embedding", {"fields": ["embedding_status", "embedding_model"]}),
    ]
    readonly_fields = [
        "source",
        "source_link",
        "created_at",
        "last_accessed_at",
        "embedding_status",
        "embedding_model",
    ]

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if field is not None and db_field.name in NODE_FIELD_HELP:
            field.help_text = NODE_FIELD_HELP[db_field.name]
        return field

    def get_queryset(self, request):
        # ModelAdmin.get_queryset orders before we could annotate the distance to order by.
        queryset = self.model._default_manager.get_queryset()
        node = _similar_to(request)
        if node is not None:
            queryset = queryset.annotate(distance=CosineDistance("embedding", node.embedding))
        return queryset.order_by(*self.get_ordering(request))

    def get_ordering(self, request):
        if _similar_to(request) is not None:
            return ["distance", "-id"]
        return ["-created_at", "-id"]

    @admin.display(description="confidence", ordering="confidence_score")
    def confidence_shown(self, obj):
        """In percent, as the site shows it, with the score that makes it."""
        return f"{percent(obj.confidence)} (score {obj.confidence_score})"

    @admin.display(description="memory")
    def short_description(self, obj):
        return obj.description[:120]

    @admin.display(boolean=True, description="current")
    def is_current(self, obj):
        return obj.valid_to is None

    @admin.display(description="distance")
    def similarity(self, obj):
        distance = getattr(obj, "distance", None)
        return "-" if distance is None else f"{distance:.3f}"

    @admin.display(description="why it knows this")
    def source_link(self, obj):
        return _provenance(obj.source_message)

    def add_view(self, request, form_url="", extra_context=None):
        if request.method == "POST":
            # Embedded before the admin's transaction opens; save_model passes the vector in.
            request.memory_vector = services.memory_vector(
                description=request.POST.get("description", ""),
                topic=request.POST.get("topic", "").strip(),
            )
        return super().add_view(request, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        if not change:
            node = browser_services.memory_node_add(
                vector=getattr(request, "memory_vector", None),
                embed=False,
                owner=data.get("owner"),
                description=data["description"],
                kind=data["kind"],
                topic=data.get("topic", ""),
                fact_key=data.get("fact_key", ""),
                state=data["state"],
                confidence_score=data["confidence_score"],
                importance=data["importance"],
                origin_context=data.get("origin_context", ""),
                source_message=data.get("source_message"),
                source=MemoryNode.Source.ADMIN,
                quote=data.get("quote", ""),
            )
            obj.pk = node.pk
            return
        extra = {
            name: data[name]
            for name in [
                "owner",
                "fact_key",
                "state",
                "confidence_score",
                "quote",
                "origin_context",
                "source_message",
                "last_accessed_at",
                "valid_to",
                "superseded_by",
                "created_at",
            ]
            if name in data
        }
        node = browser_services.memory_node_edit(
            node=obj,
            description=data["description"],
            topic=data.get("topic", ""),
            kind=data["kind"],
            importance=data["importance"],
            **extra,
        )
        if node.reads_as_instruction:
            self.message_user(
                request,
                "The new text reads like an instruction to the assistant. It is used as saved, "
                f"in the state “{node.get_state_display()}”: set it to awaiting approval if "
                "its owner should approve it first.",
                messages.WARNING,
            )

    def delete_model(self, request, obj):
        browser_services.memory_nodes_forget(node_ids=[obj.pk])

    def delete_queryset(self, request, queryset):
        browser_services.memory_nodes_forget(node_ids=list(queryset.values_list("pk", flat=True)))

    @admin.action(description="Show memories similar to this one")
    def similar_to_this(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True)[:2])
        if len(ids) != 1:
            self.message_user(request, "Select exactly one memory.", messages.WARNING)
            return None
        url = reverse("admin:memory_memorynode_changelist") + f"?similar_to={ids[0]}"
        return HttpResponseRedirect(url)

    @admin.action(description="Promote to long-term memory")
    def promote(self, request, queryset):
        count = browser_services.memory_nodes_promote(
            node_ids=list(queryset.values_list("pk", flat=True))
        )
        self.message_user(request, f"{count} memories made long-term.")

    @admin.action(description="Forget (delete) selected memories")
    def forget(self, request, queryset):
        receipt = browser_services.memory_nodes_forget(
            node_ids=list(queryset.values_list("pk", flat=True))
        )
        self.message_user(request, receipt.sentence)

    @admin.action(description="Embed again")
    def reembed(self, request, queryset):
        count = browser_services.memory_nodes_reembed(
            node_ids=list(queryset.values_list("pk", flat=True))
        )
        self.message_user(request, f"{count} memories will be embedded again.")

    @admin.action(description="Run the critic on them now")
    def criticise_now(self, request, queryset):
        count = browser_services.memory_nodes_criticise(
            node_ids=list(queryset.values_list("pk", flat=True))
        )
        self.message_user(
            request,
            f"The critic will look again at the {count} turn(s) that formed them "
            "(memories without a source message are skipped).",
        )


@admin.register(Episode)
class EpisodeAdmin(RecordsAdminViewings, admin.ModelAdmin):
    list_display = ["short_summary", "owner", "conversation", "started_at", "ended_at"]
    list_filter = [OwnerFilter, "ended_at", "embedding_status"]
    list_select_related = ["owner", "conversation"]
    search_fields = ["summary", "decisions", "outcome", "lesson"]
    autocomplete_fields = ["owner"]
    raw_id_fields = ["conversation", "messages"]
    date_hierarchy = "ended_at"
    show_full_result_count = False
    exclude = ["embedding"]
    readonly_fields = ["embedding_status", "embedding_model", "conversation_link"]

    @admin.display(description="summary")
    def short_summary(self, obj):
        return obj.summary[:120]

    @admin.display(description="conversation")
    def conversation_link(self, obj):
        if obj.conversation_id is None:
            return "-"
        url = reverse("chat:conversation", args=[obj.conversation_id])
        return format_html('<a href="{}">conversation #{}</a>', url, obj.conversation_id)


@admin.register(Predicate)
class PredicateAdmin(admin.ModelAdmin):
    list_display = ["name", "category", "aliases", "single_valued", "labels"]
    list_filter = ["category", "single_valued"]
    search_fields = ["name"]
    ordering = ["name"]


@admin.register(Triple)
class TripleAdmin(RecordsAdminViewings, admin.ModelAdmin):
    list_display = [
        "subject",
        "predicate",
        "object",
        "category",
        "confidence_shown",
        "owner",
        "valid_from",
        "is_current",
    ]
    list_filter = [OwnerFilter, "category", CurrentFilter, "valid_from"]
    list_select_related = ["owner", "predicate"]
    search_fields = ["subject", "object", "predicate__name", "provenance"]
    autocomplete_fields = ["owner", "predicate"]
    raw_id_fields = ["source_message"]
    readonly_fields = ["source_link"]
    date_hierarchy = "valid_from"
    show_full_result_count = False

    @admin.display(description="confidence", ordering="confidence")
    def confidence_shown(self, obj):
        return percent(obj.confidence)

    @admin.display(boolean=True, description="current")
    def is_current(self, obj):
        return obj.valid_to is None

    @admin.display(description="why it knows this")
    def source_link(self, obj):
        return _provenance(obj.source_message)


@admin.register(MemoryLink)
class MemoryLinkAdmin(admin.ModelAdmin):
    list_display = ["source", "kind", "target", "score", "created_at"]
    list_filter = ["kind", "created_at"]
    list_select_related = ["source", "target"]
    search_fields = ["source__description", "target__description"]
    raw_id_fields = ["source", "target"]
    show_full_result_count = False


@admin.register(Critique)
class CritiqueAdmin(RecordsAdminViewings, admin.ModelAdmin):
    list_display = ["created_at", "verdict", "delta", "node", "owner", "model"]
    list_filter = ["verdict", OwnerFilter, "created_at"]
    list_select_related = ["node", "owner"]
    search_fields = ["debate", "node__description"]
    raw_id_fields = ["node", "message"]
    readonly_fields = ["source_link"]
    date_hierarchy = "created_at"
    show_full_result_count = False

    @admin.display(description="turn it judged")
    def source_link(self, obj):
        return _provenance(obj.message)


@admin.register(WorldState)
class WorldStateAdmin(RecordsAdminViewings, admin.ModelAdmin):
    """Edits go through `world_apply`, like the memory browser's: same rules, same event."""

    form = WorldStateAdminForm
    list_display = ["owner", "project", "topic_list", "version", "updated_at"]
    list_select_related = ["owner"]
    search_fields = ["owner__username", "project"]
    autocomplete_fields = ["owner"]
    ordering = ["owner__username"]
    fields = ["owner", "topics", "project", "goals", "behaviour", "version", "updated_at"]
    readonly_fields = ["version", "updated_at"]

    def get_readonly_fields(self, request, obj=None):
        return [*self.readonly_fields, "owner"] if obj is not None else self.readonly_fields

    @admin.display(description="topics")
    def topic_list(self, obj):
        return ", ".join(obj.topics) or "-"

    def save_model(self, request, obj, form, change):
        owner_id = obj.owner_id if change else form.cleaned_data["owner"].pk
        result = world_services.world_apply(user_id=owner_id, ops=form.operations(), source="admin")
        obj.pk = result.state.pk
        obj.version = result.state.version
