from __future__ import annotations

from django.contrib import admin, messages

from apps.accounts import services
from apps.accounts.forms import AdminLoginForm
from apps.accounts.models import ApiKey, UserSettings
from apps.accounts.viewings import RecordsAdminViewings
from apps.core import admin as core_admin
from apps.core.models import Event

# The admin's login warns before a lockout, as the site's does.
admin.site.login_form = AdminLoginForm

# The event log tells of users' memories too; core's admin, below accounts, cannot record the
# look, so it is registered again here with the recording (core's admin is loaded first).
admin.site.unregister(Event)


@admin.register(Event)
class EventAdmin(RecordsAdminViewings, core_admin.EventAdmin):
    pass


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "created_at", "last_used_at")
    search_fields = ("user__username", "name", "prefix")
    list_select_related = ("user",)
    autocomplete_fields = ("user",)
    actions = ("revoke",)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("user", "name")
        return ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return ("user", "prefix", "created_at", "last_used_at", "revoked_at")

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        key, secret = services.api_key_create(user=obj.user, name=obj.name)
        obj.pk, obj.prefix, obj.hashed_key = key.pk, key.prefix, key.hashed_key
        obj.created_at = key.created_at
        obj._state.adding = False
        messages.success(
            request, f"The new key is {secret} — copy it now: it will not be shown again."
        )

    @admin.action(description="Revoke selected API keys")
    def revoke(self, request, queryset):
        revoked = 0
        for key in queryset.filter(revoked_at=None):
            services.api_key_revoke(key=key)
            revoked += 1
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)


@admin.register(UserSettings)
class UserSettingsAdmin(admin.ModelAdmin):
    """Each user's own choices (their Settings page), for an admin helping them: whether memory
    is on, what they told the assistant, the knowledge block's language, what may be learnt."""

    list_display = ("user", "memory_enabled", "knowledge_language", "time_zone", "updated_at")
    list_filter = ("memory_enabled", "knowledge_language")
    search_fields = ("user__username", "about_me", "answer_style")
    list_select_related = ("user",)
    autocomplete_fields = ("user",)
    readonly_fields = ("updated_at",)
