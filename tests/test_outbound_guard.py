"""The guard that fails a test when an outbound call starts inside a transaction (tests/outbound.py)
catches what it is for, on any thread, and leaves the test's own transaction aside."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, transaction

from apps.memory.embedding import get_embedder
from tests.outbound import OutboundCallInAtomic, no_outbound_call_in_atomic


def _embed() -> list[float]:
    return get_embedder().embed(["The user lives in Brno"])[0]


@pytest.mark.django_db
def test_an_embedding_inside_a_products_transaction_fails(llm_stub):
    with (
        pytest.raises(OutboundCallInAtomic, match="1 outbound call") as failure,
        no_outbound_call_in_atomic(),
        transaction.atomic(),
    ):
        _embed()
    assert "HTTPTransport.handle_request inside 1 atomic block" in str(failure.value)
    assert "_embed" in str(failure.value)


@pytest.mark.django_db
def test_the_tests_own_transaction_does_not_count(llm_stub):
    assert connection.in_atomic_block  # pytest-django's, around a non-transactional test

    with no_outbound_call_in_atomic() as found:
        _embed()

    assert found == []


@pytest.mark.django_db(transaction=True)
def test_a_call_on_another_thread_counts_that_threads_transaction(llm_stub):
    def embed_in_a_transaction():
        try:
            with transaction.atomic():
                return _embed()
        finally:
            connection.close()

    with (
        pytest.raises(OutboundCallInAtomic),
        no_outbound_call_in_atomic(),
        ThreadPoolExecutor(1) as pool,
    ):
        pool.submit(embed_in_a_transaction).result()
    with no_outbound_call_in_atomic() as found, ThreadPoolExecutor(1) as pool:
        pool.submit(_embed).result()
    assert found == []
