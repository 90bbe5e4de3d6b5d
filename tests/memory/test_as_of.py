"""What Thalamus believed at a moment: superseded values, and facts with an end."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.memory import selectors, services
from apps.memory.models import MemoryNode

pytestmark = pytest.mark.django_db


def _believed(user, at) -> set[str]:
    return set(
        selectors.memories_as_of(user_id=user.pk, at=at).values_list("description", flat=True)
    )


def _backdate(node: MemoryNode, days: int) -> None:
    """Pretend a memory (and every version of it) was made `days` ago."""
    then = timezone.now() - timedelta(days=days)
    MemoryNode.objects.filter(pk=node.pk).update(created_at=then, valid_from=then)


def test_a_superseded_fact_shows_its_old_value_then_and_its_new_value_now(user, other_user):
    home = services.memory_node_create(
        owner=user, description="Alice lives in Rome", fact_key="home", embed=False, source="admin"
    )
    _backdate(home, 10)
    services.memory_node_create(
        owner=user, description="Alice lives in Milan", fact_key="home", embed=False, source="admin"
    )
    services.memory_node_create(
        owner=other_user, description="Bob lives in Oslo", embed=False, source="admin"
    )
    now = timezone.now()

    assert _believed(user, now - timedelta(days=5)) == {"Alice lives in Rome"}
    assert _believed(user, now) == {"Alice lives in Milan"}
    assert _believed(user, now - timedelta(days=11)) == set()


def test_a_fact_with_an_end_disappears_after_it(user):
    exam = services.memory_node_create(
        owner=user, description="Alice has an exam tomorrow", embed=False, source="admin"
    )
    _backdate(exam, 3)
    ends = timezone.now() - timedelta(days=1)
    exam = services.memory_node_set_validity(node=exam, valid_until=ends)
    now = timezone.now()

    assert exam.valid_until == ends and exam.is_current
    assert _believed(user, now - timedelta(days=2)) == {"Alice has an exam tomorrow"}
    assert _believed(user, now) == set()

    assert services.memories_expire() == 1
    exam.refresh_from_db()
    assert exam.valid_to == ends
    assert _believed(user, now - timedelta(days=2)) == {"Alice has an exam tomorrow"}


def test_a_new_value_starts_without_the_old_ones_end(user):
    plan = services.memory_node_create(
        owner=user,
        description="Alice flies to Oslo on Friday",
        fact_key="trip",
        embed=False,
        source="admin",
    )
    services.memory_node_set_validity(node=plan, valid_until=timezone.now() + timedelta(days=2))

    moved = services.memory_node_create(
        owner=user,
        description="Alice moved her trip to June",
        fact_key="trip",
        embed=False,
        source="admin",
    )

    assert moved.valid_until is None
    old = MemoryNode.objects.get(fact_key="trip", valid_to__isnull=False)
    assert old.valid_until is not None


def test_the_browser_shows_what_it_believed_as_of_a_date(client, user):
    client.force_login(user)
    home = services.memory_node_create(
        owner=user, description="Alice lives in Rome", fact_key="home", embed=False, source="admin"
    )
    _backdate(home, 10)
    services.memory_node_create(
        owner=user, description="Alice lives in Milan", fact_key="home", embed=False, source="admin"
    )
    earlier = (timezone.localdate() - timedelta(days=5)).isoformat()

    then = client.get(reverse("memory:list"), {"as_of": earlier}).content.decode()
    now = client.get(reverse("memory:list")).content.decode()
    fragment = client.get(
        reverse("memory:list"),
        {"as_of": earlier},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="memory-list",
    ).content.decode()

    assert "Alice lives in Rome" in then and "Alice lives in Milan" not in then
    assert 'id="as-of-note"' in then and "then replaced" in then
    assert "Alice lives in Milan" in now and "Alice lives in Rome" not in now
    assert "Alice lives in Rome" in fragment and 'id="as-of-note"' in fragment
