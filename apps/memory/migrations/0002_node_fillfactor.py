from __future__ import annotations

from django.db import migrations


class Migration(migrations.Migration):
    """Room on each page lets updates that touch no indexed column (last_accessed_at,
    confidence_score, state) stay HOT: no new entries in the HNSW and GIN indexes."""

    dependencies = [("memory", "0001_initial")]
    operations = [
        migrations.RunSQL(
            "ALTER TABLE memory_memorynode SET (fillfactor = 80)",
            "ALTER TABLE memory_memorynode RESET (fillfactor)",
        )
    ]
