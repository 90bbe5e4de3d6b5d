"""Who sees a user's memories: never another user; admins, who curate them, and each time an
admin looks the user is told on their settings page."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from apps.accounts.models import AdminViewing
from apps.chat.models import Conversation, Message
from apps.core.models import Event
from apps.core.services import event_record
from apps.dashboard import selectors as mind_selectors
from apps.dashboard.rendering import render_refresh
from apps.memory import services
from apps.memory.models import MemoryNode
from apps.memory.seeds import load_seed_truths

pytestmark = pytest.mark.django_db

VIEWED = re.compile(r"An admin, curator, viewed (your Mind page|your memories in the admin) on ")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user(
        "curator", password="correct-horse-battery-9", is_staff=True, is_superuser=True
    )


@pytest.fixture
def bees(user):
    return services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )


def _settings_of(client, user) -> str:
    client.force_login(user)
    return client.get(reverse("settings")).content.decode()


def test_settings_say_who_can_see_the_memories_and_that_no_admin_looked_yet(client, user):
    page = _settings_of(client, user)

    assert "No other user, ever" in page
    assert "The admins of this Thalamus can, because they curate memory" in page
    assert "No admin has viewed your memories." in page


def test_an_admin_watching_a_users_mind_page_is_shown_on_that_users_settings(client, staff, user):
    client.force_login(staff)
    assert client.get(reverse("dashboard:user", args=[user.pk])).status_code == 200
    # A reload in the same minutes is the same look.
    client.get(reverse("dashboard:user", args=[user.pk]))

    page = _settings_of(client, user)

    assert VIEWED.findall(page) == ["your Mind page"]
    assert "No admin has viewed" not in page


def test_an_admin_opening_a_users_memories_in_the_admin_is_recorded(client, staff, user, bees):
    client.force_login(staff)
    assert client.get(reverse("admin:memory_memorynode_changelist")).status_code == 200
    assert AdminViewing.objects.filter(owner=user, place="admin").count() == 1
    AdminViewing.objects.all().delete()

    url = reverse("admin:memory_memorynode_change", args=[bees.pk])
    assert client.get(url).status_code == 200

    assert VIEWED.findall(_settings_of(client, user)) == ["your memories in the admin"]


def test_nobody_is_told_of_their_own_looks_or_of_global_knowledge(client, staff, user):
    services.memory_node_create(
        owner=staff, description="Curator's own", embed=False, source="admin"
    )
    services.memory_node_create(owner=None, description="Water boils", embed=False, source="admin")
    client.force_login(staff)
    client.get(reverse("dashboard:mine"))
    client.get(reverse("dashboard:global"))
    client.get(reverse("admin:memory_memorynode_changelist"))
    client.force_login(user)
    client.get(reverse("dashboard:mine"))

    assert not AdminViewing.objects.exists()


def test_the_mind_page_an_admin_watches_speaks_of_the_user_by_name(client, staff, user):
    event_record(kind="perception", summary="Learned 2 new things about you.", owner=user)
    event_record(
        kind="edit", summary="You said this is wrong, so I stopped using it: x", owner=user
    )

    client.force_login(staff)
    watched = client.get(reverse("dashboard:user", args=[user.pk])).content.decode()
    client.force_login(user)
    own = client.get(reverse("dashboard:mine")).content.decode()

    assert "Learned 2 new things about alice." in watched
    assert "alice said this is wrong" in watched
    assert "about you" not in watched
    assert "Learned 2 new things about you." in own


def test_what_is_pushed_to_an_admin_watching_speaks_of_the_user_by_name(staff, user):
    Event.objects.create(kind="perception", summary="Read your last message.", owner=user)
    watched = mind_selectors.mind_scope_for(user=staff, who=str(user.pk))
    own = mind_selectors.mind_scope_for(user=user, who="me")

    def pushed(scope):
        html, _, _ = render_refresh(
            scope=scope,
            graph_before=mind_selectors.EMPTY_GRAPH,
            graph_limit=mind_selectors.GRAPH_LIMIT,
            after_event_id=0,
        )
        return unescape(html)

    assert "Read alice's last message." in pushed(watched)
    assert "Read your last message." in pushed(own)


def test_an_admin_reading_a_users_events_in_the_admin_is_recorded(client, staff, user):
    Event.objects.create(kind="edit", summary="You edited a memory: bees", owner=user)
    client.force_login(staff)

    assert client.get(reverse("admin:core_event_changelist")).status_code == 200

    assert AdminViewing.objects.filter(owner=user, place="admin").count() == 1


def test_the_receipt_says_who_sees_the_memories(client, user):
    conversation = Conversation.objects.create(owner=user)
    asked = Message.objects.create(conversation=conversation, role="user", content="Hi")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        status="complete",
        content="Hello",
        reply_to=asked,
        trace={"memory": {"memories": []}},
    )
    client.force_login(user)

    page = client.get(f"/c/{conversation.pk}/").content.decode()

    assert "seen by you and by this Thalamus's admins, who curate them; never by other users" in (
        page.replace("&#x27;", "'")
    )


def test_the_shared_fact_about_memory_no_longer_claims_admins_cannot_see(db):
    load_seed_truths()

    fact = MemoryNode.objects.get(owner=None, fact_key="thalamus-memory")

    assert "private to that user" not in fact.description
    assert "admins" in fact.description and "No user ever sees another user's" in fact.description
