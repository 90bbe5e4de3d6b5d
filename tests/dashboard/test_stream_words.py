"""The mind stream speaks to the user in sentences, not in the mind's own terms."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.cognition.stream_words import perception_sentence
from apps.core.models import Event
from apps.memory import consolidation_services, critique_services, services, world_services

pytestmark = pytest.mark.django_db


def _outcome(created=0, updated=0, held=0) -> dict:
    return {
        "created": list(range(created)),
        "updated": list(range(updated)),
        "left": [1, 2],
        "rejected": [{}],
        "triples": [3],
        "quarantined": list(range(held)),
    }


@pytest.mark.parametrize(
    ("outcome", "sentence"),
    [
        (_outcome(), "Read your last message; nothing new to remember."),
        (_outcome(created=1), "Learned 1 new thing about you."),
        (_outcome(created=2), "Learned 2 new things about you."),
        (
            _outcome(created=2, updated=1),
            "Learned 2 new things about you and updated 1 thing I knew.",
        ),
        (
            _outcome(held=1),
            "Set aside 1 that reads like an order to me, for your approval.",
        ),
    ],
)
def test_reflection_says_what_it_learned_in_a_sentence(outcome, sentence):
    assert perception_sentence(outcome) == sentence


def test_the_streams_lines_are_sentences_without_internal_terms(client, user):
    node = services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    critique_services.critique_record(
        node_id=node.pk, message=None, verdict="withstands", debate="Yes."
    )
    world_services.world_apply(
        user_id=user.pk,
        ops=[{"op": "append", "path": "behaviour", "value": "Answer in French"}],
        source="turn",
    )
    consolidation_services._record_promotion_events(
        consolidation_services.PromotionResult(
            promoted=[node.pk], merged={}, superseded={}, links=[]
        ),
        {node.pk: user.pk},
    )
    client.force_login(user)

    body = client.get(reverse("dashboard:mine")).content.decode()

    summaries = list(Event.objects.filter(owner=user).values_list("summary", flat=True))
    assert (
        "Checked a memory against what you said; it holds, so I trust it more (now 50%): "
        "Alice keeps bees" in summaries
    )
    assert (
        "From what you said, I added “Answer in French” to how you want me to answer." in summaries
    )
    assert "Kept 1 memory for the long term, confirmed often enough." in summaries
    for jargon in ("withstands", "world state v", "promoted", "Perception", "Critique"):
        assert jargon not in " ".join(summaries)
    stream = body.split('id="mind-stream"')[1]
    assert ">Checking</span>" in stream and ">Long-term memory</span>" in stream
    assert ">holds</span>" in stream
