"""The memory browser in the words its people use."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.memory import services

pytestmark = pytest.mark.django_db


def test_a_filter_with_no_results_says_so_not_that_memory_is_empty(alice, user):
    # Empty filter fields (a submitted form) filter nothing.
    nothing = alice.get(reverse("memory:list"), {"q": "", "kind": ""}).content.decode()
    assert "No memories here yet" in nothing and "match this filter" not in nothing

    services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    filtered = alice.get(reverse("memory:list"), {"kind": "rule"}).content.decode()
    assert "No memories match this filter." in filtered
    assert "No memories here yet" not in filtered


def test_the_state_filter_names_states_as_the_list_does(alice):
    body = alice.get(reverse("memory:list")).content.decode()
    assert '<option value="volatile">Short-term</option>' in body
    assert '<option value="promoted">Long-term</option>' in body
    assert "Volatile" not in body and "Promoted" not in body


def test_confirm_in_the_list_says_that_it_worked(alice, user):
    bees = services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )

    html = alice.post(
        reverse("memory:confirm", args=[bees.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()

    row, notice = html.split('id="memory-undo"')
    assert f'id="memory-{bees.pk}"' in row
    assert "<strong>Confirmed</strong>" in notice and 'data-seconds="6"' in notice


def test_what_forget_did_has_a_close_button(alice, user):
    services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    alice.post(reverse("memory:forget_all"), {"confirm": "forget everything"})
    body = alice.get(reverse("memory:list")).content.decode()
    receipt = body.split('id="forget-receipt"')[1].split("</div>")[0]
    assert "Forgot 1 memory" in receipt
    assert 'class="btn btn-sm btn-ghost receipt-close" aria-label="Close this notice"' in receipt


def test_the_facts_page_names_the_user_you(alice, user):
    from apps.memory import graph_services

    graph_services.triple_upsert(owner=user, subject="user", predicate="lives_in", object="Ghent")
    body = alice.get(reverse("memory:knowledge")).content.decode()
    assert '<td data-label="About">You</td>' in body
