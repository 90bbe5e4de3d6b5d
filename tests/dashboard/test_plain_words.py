"""The Mind's graph says a user's own memories to them; an admin reads them as stored."""

from __future__ import annotations

import pytest

from apps.dashboard.selectors import mind_graph, mind_scope_for
from apps.memory.models import MemoryNode

pytestmark = pytest.mark.django_db


def test_the_graph_says_your_memories_to_you_and_as_stored_to_an_admin(user, django_user_model):
    ghent = MemoryNode.objects.create(owner=user, description="The user lives in Ghent")
    admin = django_user_model.objects.create_user("curator", is_staff=True)

    own = mind_graph(scope=mind_scope_for(user=user, who="me"))
    watched = mind_graph(scope=mind_scope_for(user=admin, who=str(user.pk)))

    assert own["nodes"][ghent.pk]["label"] == "You live in Ghent"
    assert watched["nodes"][ghent.pk]["label"] == "The user lives in Ghent"


def test_the_stream_says_the_memory_of_a_sentence_to_its_owner(client, user, django_user_model):
    from django.urls import reverse

    from apps.core.models import Event

    said = "Checked a memory against what you said; it holds: The user lives in Ghent"
    Event.objects.create(owner=user, kind="critique", summary=said)
    admin = django_user_model.objects.create_user("curator", is_staff=True)

    client.force_login(user)
    own = client.get(reverse("dashboard:mine")).content.decode()
    client.force_login(admin)
    watched = client.get(reverse("dashboard:user", args=[user.pk])).content.decode()

    assert "it holds: you live in Ghent" in own
    assert "it holds: The user lives in Ghent" in watched


def test_the_write_rate_speaks_of_you_on_your_own_mind(client, user, django_user_model):
    from django.urls import reverse

    admin = django_user_model.objects.create_user("curator", is_staff=True)
    client.force_login(user)
    own = client.get(reverse("dashboard:mine")).content.decode()
    client.force_login(admin)
    watched = client.get(reverse("dashboard:user", args=[user.pk])).content.decode()

    assert "no turn stated anything about you in the last hour" in own
    assert "no turn stated anything about alice in the last hour" in watched
