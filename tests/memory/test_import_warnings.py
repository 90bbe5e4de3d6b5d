"""Importing a file that teaches nothing is a warning, never a green success."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.memory.models import MemoryNode

pytestmark = pytest.mark.django_db


def _import(client, data) -> tuple[str, str]:
    upload = SimpleUploadedFile("file.json", json.dumps(data).encode(), "application/json")
    response = client.post(reverse("memory:import"), {"file": upload}, follow=True)
    [message] = list(response.context["messages"])
    return message.level_tag, str(message)


def test_a_json_file_that_is_not_a_memory_export_is_a_warning(client, user):
    client.force_login(user)
    level, said = _import(client, {"model": "gpt-4", "messages": [{"role": "user"}]})
    assert level == "warning"
    assert said.startswith("Nothing was imported: this file is not a memory export")
    assert not MemoryNode.objects.filter(owner=user).exists()


def test_an_export_that_holds_nothing_says_so_as_a_warning(client, user):
    client.force_login(user)
    assert _import(client, {"format": "thalamus-memories/1", "memories": []}) == (
        "warning",
        "The file holds no memories, episodes or facts.",
    )


def test_an_export_that_adds_memories_is_a_success(client, user):
    client.force_login(user)
    level, said = _import(client, {"memories": [{"description": "Alice keeps bees"}]})
    assert (level, said) == ("success", "Imported 1 memory.")
