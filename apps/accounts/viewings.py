"""An admin's look at other users' memories in the admin is recorded for those users."""

from __future__ import annotations

from apps.accounts.models import AdminViewing
from apps.accounts.services import admin_viewing_record


class RecordsAdminViewings:
    """For the ModelAdmin of rows with an `owner`: the users whose rows a list page or a row's
    page shows are told on their settings page (admins see memories because they curate)."""

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        # The page's rows; the template iterates the same evaluated queryset.
        admin_viewing_record(
            viewer=request.user,
            owner_ids={row.owner_id for row in changelist.result_list},
            place=AdminViewing.Place.ADMIN,
        )
        return changelist

    def get_object(self, request, object_id, from_field=None):
        found = super().get_object(request, object_id, from_field)
        if found is not None and request.method == "GET":
            admin_viewing_record(
                viewer=request.user, owner_ids={found.owner_id}, place=AdminViewing.Place.ADMIN
            )
        return found
