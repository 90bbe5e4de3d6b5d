from __future__ import annotations

from django.db.models import QuerySet

from apps.imports.models import Import


def imports_for(*, user) -> QuerySet[Import]:
    return Import.objects.filter(owner=user)
