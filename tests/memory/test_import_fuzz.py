"""Mutated memory files through the memory browser's real import view: no file makes a 500, a
refused file gets one sentence of ours naming the problem, an accepted one is in memory after."""

from __future__ import annotations

from collections import Counter

import pytest
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.core.validation import json_load
from apps.memory.export_services import MemoryExport
from apps.memory.models import Episode, MemoryNode, Triple
from apps.memory.schemas import normal_text
from tests.fuzz import mutants
from tests.imports.test_fuzz import FILES_PER_FORMAT, assert_one_sentence_of_ours

pytestmark = pytest.mark.django_db

SAMPLE = {
    "format": "thalamus-memories/1",
    "exported_at": "2026-11-20T10:00:00+00:00",
    "memories": [
        {"description": "Alice keeps bees in Lyon", "kind": "fact", "topic": "bees"},
        {
            "description": "Alice prefers short answers",
            "kind": "preference",
            "state": "promoted",
            "confidence_score": 3,
            "importance": 0.8,
            "created_at": "2026-01-02T03:04:05+00:00",
        },
        {"description": "Alice lives in Lyon", "fact_key": "home_city", "origin_context": "x"},
    ],
    "episodes": [
        {"summary": "Planned the hives", "lesson": "Start in spring"},
        {"summary": "Moved to Lyon", "started_at": "2025-05-01T00:00:00+00:00"},
    ],
    "triples": [
        {"subject": "user", "predicate": "likes", "object": "honey", "confidence": 0.9},
        {"subject": "user", "predicate": "lives_in", "object": "Lyon", "category": "places"},
    ],
}


def test_mutated_memory_files_are_refused_in_one_sentence_or_imported(client, django_user_model):
    client.raise_request_exception = False
    statuses, outcomes = Counter(), Counter()

    for number, mutant in enumerate(mutants(SAMPLE, count=FILES_PER_FORMAT, seed=27)):
        user = django_user_model.objects.create(username=f"fuzz{number}")
        client.force_login(user)
        client.cookies.pop("messages", None)  # the last file's, never read
        upload = SimpleUploadedFile(f"memories{number}.json", mutant.data)
        response = client.post(reverse("memory:import"), {"file": upload})
        statuses[response.status_code] += 1
        if response.status_code != 302:
            continue
        [message] = [str(m) for m in get_messages(response.wsgi_request)]
        if message.startswith("Nothing was imported: "):
            outcomes["refused"] += 1
            assert_one_sentence_of_ours(message.removeprefix("Nothing was imported: "))
            assert not MemoryNode.objects.filter(owner=user).exists()
            continue
        outcomes["accepted"] += 1
        assert message.startswith(("Imported ", "The file holds no")), message
        export = MemoryExport.model_validate(json_load(mutant.data, name="it"))
        descriptions = {
            normal_text(text)
            for text in MemoryNode.objects.filter(owner=user).values_list("description", flat=True)
        }
        assert {normal_text(m.description) for m in export.memories} <= descriptions
        summaries = set(Episode.objects.filter(owner=user).values_list("summary", flat=True))
        assert {e.summary.strip() for e in export.episodes} <= {s.strip() for s in summaries}
        assert Triple.objects.filter(owner=user).count() >= min(len(export.triples), 1)

    print(f"\nmemory file: {dict(statuses)} {dict(outcomes)}")
    assert statuses == {302: FILES_PER_FORMAT}
