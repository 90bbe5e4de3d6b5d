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
