from __future__ import annotations

from django.db import migrations


class Migration(migrations.Migration):
    """Memory 0014 rewrote both tables, which clears their visibility maps: until a vacuum sets
    them again, the recall's index-only scans read the table for every entry (a 10k-row owner's
    window of 2,000 words took 13 ms instead of 0.5). Outside a transaction, as VACUUM must be."""

    atomic = False
    dependencies = [("memory", "0014_stemmed_words")]

    operations = [
        migrations.RunSQL(
            "VACUUM (ANALYZE) memory_memorynode, memory_episode", migrations.RunSQL.noop
        ),
    ]
