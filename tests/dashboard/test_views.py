"""Dashboard pages: your own mind for everyone, any mind for staff, 404 for the rest."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.core.services import event_record
from apps.memory import browser_services, critique_services, services

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user(
        "curator", password="correct-horse-battery-9", is_staff=True
    )


def test_my_dashboard_shows_my_counters_and_events(client, user, other_user):
    services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    services.memory_node_create(
        owner=other_user, description="Mallory picks locks", embed=False, source="admin"
    )
    event_record(kind="perception", summary="noticed the bees", owner=user)
    event_record(kind="perception", summary="noticed the locks", owner=other_user)
    client.force_login(user)

    response = client.get(reverse("dashboard:mine"))

    body = response.content.decode()
    assert response.context["counters"]["volatile"] == 1
    assert "noticed the bees" in body and "noticed the locks" not in body
    assert 'ws-connect="/ws/mind/me/?after=' in body


@pytest.mark.parametrize("path", ["/dashboard/global/", "/dashboard/u/{other}/"])
def test_a_user_cannot_open_someone_elses_or_the_global_dashboard(client, user, other_user, path):
    client.force_login(user)
    assert client.get(path.format(other=other_user.pk)).status_code == 404


def test_staff_can_watch_any_user_and_global_knowledge(client, staff, user):
    client.force_login(staff)
    assert client.get(reverse("dashboard:user", args=[user.pk])).status_code == 200
    assert client.get(reverse("dashboard:global")).status_code == 200
    response = client.get(reverse("dashboard:switch"), {"who": str(user.pk)})
    assert response.url == reverse("dashboard:user", args=[user.pk])


def test_node_detail_is_mine_only_and_shows_where_it_came_from(client, user, other_user):
    mine = browser_services.memory_node_add(
        owner=user, description="Alice keeps bees", source="admin"
    )
    theirs = services.memory_node_create(
        owner=other_user, description="Mallory", embed=False, source="admin"
    )
    client.force_login(user)
    assert client.get(reverse("dashboard:node", args=[theirs.pk])).status_code == 404
    body = client.get(reverse("dashboard:node", args=[mine.pk])).content.decode()
    assert "Alice keeps bees" in body and "Critiques" in body


def test_the_dashboard_page_costs_a_bounded_number_of_queries(
    client, user, django_assert_max_num_queries
):
    for n in range(30):
        event_record(kind="perception", summary=f"noticed {n}", owner=user)
    client.force_login(user)
    with django_assert_max_num_queries(12):
        client.get(reverse("dashboard:mine"))


def test_a_critique_in_the_stream_opens_onto_its_whole_debate(client, user):
    node = services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    critique_services.critique_record(
        node_id=node.pk, message=None, verdict="fails", debate="She said wasps, not bees."
    )
    client.force_login(user)
    body = client.get(reverse("dashboard:mine")).content.decode()
    assert "She said wasps, not bees." in body and "verdict-fails" in body
