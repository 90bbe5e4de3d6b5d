from __future__ import annotations

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models
from django.db.models.lookups import LessThanOrEqual

SHORT_TEXT = models.Q(
    LessThanOrEqual(
        models.Func("topic", function="octet_length", output_field=models.IntegerField())
        + models.Func("description", function="octet_length", output_field=models.IntegerField()),
        500,
    )
)


class Migration(migrations.Migration):
    """The owner's words newest first, so that the full-text match reads a bounded window of
    them (issue #29 item 3); built concurrently so that chats go on meanwhile."""

    atomic = False
    dependencies = [("memory", "0012_current_memory_count")]

    operations = [
        AddIndexConcurrently(
            model_name="memorynode",
            index=models.Index(
                fields=["owner", "-created_at"],
                include=["id", "kind", "tsv"],
                condition=models.Q(("valid_to__isnull", True)) & SHORT_TEXT,
                name="memnode_owner_recent_words",
            ),
        ),
        AddIndexConcurrently(
            model_name="memorynode",
            index=models.Index(
                fields=["owner", "-created_at"],
                condition=models.Q(("valid_to__isnull", True)) & ~SHORT_TEXT,
                name="memnode_owner_recent_long",
            ),
        ),
        RemoveIndexConcurrently(model_name="memorynode", name="memnode_owner_words"),
    ]
