"""Every admin page of every registered model opens for a superuser.

Generated from the admin's registry, so a model registered tomorrow is opened too (and the
route coverage gate, tests/route_coverage.py, fails the suite until it has an object here).
"""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, SolarSchedule

from apps.accounts.services import api_key_create, user_settings_update
from apps.core.models import PromptOverride
from apps.core.prompts import PROMPT_PLACEHOLDERS
from apps.memory import services as memory_services
from apps.memory.models import Critique, MemoryNode
from tests.security.test_isolation import owned_by

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_of_each(user, config, default_schedules):
    """At least one row of every model the admin shows."""
    config(critic_enabled=True)
    mine = owned_by(user)
    other = memory_services.memory_node_create(
        owner=user, description="Bees", embed=False, source="admin"
    )
    memory_services.memory_link_upsert(source=mine.node, target=other, kind="supports", score=1)
    Critique.objects.create(
        node=mine.node, owner=user, verdict=Critique.Verdict.WITHSTANDS, debate="Fine.", delta=1
    )
    Group.objects.create(name="curators")
    ClockedSchedule.objects.create(clocked_time=timezone.now())
    CrontabSchedule.objects.create(minute="0", hour="3")
    SolarSchedule.objects.create(event="sunrise", latitude=48.85, longitude=2.35)
    name = sorted(PROMPT_PLACEHOLDERS)[0]
    PromptOverride.objects.create(name=name, text=" ".join(PROMPT_PLACEHOLDERS[name]) or ".")
    api_key_create(user=user, name="laptop")
    user_settings_update(user=user, about_me="I keep bees.")
    # django-axes shows its login records; they are kept in Redis here, so its tables stay
    # empty, and its handler refuses rows saved one by one (bulk_create sends no signal).
    attempt = {"user_agent": "curl", "username": "alice", "http_accept": "*/*", "path_info": "/"}
    AccessAttempt.objects.bulk_create(
        [AccessAttempt(**attempt, get_data="", post_data="", failures_since_start=1)]
    )
    AccessLog.objects.bulk_create([AccessLog(**attempt)])
    AccessFailureLog.objects.bulk_create([AccessFailureLog(**attempt)])
    return mine


def test_every_page_of_every_model_opens_for_a_superuser(admin_client, admin_user, one_of_each, rf):
    request = rf.get("/admin/")
    request.user = admin_user
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        base = f"/admin/{meta.app_label}/{meta.model_name}/"
        obj = model._default_manager.order_by("pk").first()
        assert obj is not None, f"no {meta.label} to open its pages: create one in one_of_each"

        def opens(url: str, allowed: bool, base: str = base) -> None:
            response = admin_client.get(url, follow=True)
            # A one-row model's list opens its form (the runtime configuration); no page
            # sends elsewhere (the login page).
            assert all(to.startswith(base) for to, _ in response.redirect_chain), url
            # A page its ModelAdmin does not allow (adding login records) is a 403 by design.
            assert response.status_code == (200 if allowed else 403), url

        opens(base, True)
        opens(f"{base}add/", model_admin.has_add_permission(request))
        opens(f"{base}{obj.pk}/change/", True)
        opens(f"{base}{obj.pk}/history/", True)
        opens(f"{base}{obj.pk}/delete/", model_admin.has_delete_permission(request, obj))
        # The bare object URL sends to its change page.
        response = admin_client.get(f"{base}{obj.pk}/")
        assert response.status_code == 302 and response["Location"].endswith("/change/")
    for app_label in {model._meta.app_label for model in admin.site._registry}:
        assert admin_client.get(f"/admin/{app_label}/").status_code == 200


def test_the_admins_own_pages_open(admin_client, admin_user, one_of_each):
    assert admin_client.get("/admin/").status_code == 200
    assert admin_client.get("/admin/jsi18n/").status_code == 200
    assert admin_client.get("/admin/password_change/").status_code == 200
    assert admin_client.get("/admin/password_change/done/").status_code == 200
    assert admin_client.get(f"/admin/auth/user/{admin_user.pk}/password/").status_code == 200
    response = admin_client.get(
        "/admin/autocomplete/",
        {"app_label": "accounts", "model_name": "apikey", "field_name": "user", "term": "ali"},
    )
    assert response.status_code == 200 and "alice" in response.content.decode()
    # A memory has no page on the site: "view on site" has nowhere to go.
    memory_type = ContentType.objects.get_for_model(MemoryNode)
    response = admin_client.get(f"/admin/r/{memory_type.pk}/{one_of_each.node.pk}/")
    assert response.status_code == 404
    assert admin_client.get("/admin/no-such-page/").status_code == 404
    # Signed in already: the login page sends to the index.
    assert admin_client.get("/admin/login/").status_code == 302
    assert admin_client.post("/admin/logout/").status_code == 302
    assert admin_client.get("/admin/").status_code == 302
