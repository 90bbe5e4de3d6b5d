from __future__ import annotations

from django.db import migrations, models

# Kept by the database, so that every writer keeps it. A statement's new rows are read once
# (COPY of a million memories: one pass); an update only when it changed the text. AFTER
# triggers, because the generated `tsv` is not computed yet in a BEFORE one.
WORD_TRIGGERS = """
CREATE FUNCTION memory_memorynode_words_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_memoryword (word)
    SELECT DISTINCT unnest(tsvector_to_array(tsv)) FROM added
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER memnode_words_inserted AFTER INSERT ON memory_memorynode
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION memory_memorynode_words_added();

CREATE FUNCTION memory_memorynode_words_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_memoryword (word)
    SELECT unnest(tsvector_to_array(NEW.tsv))
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER memnode_words_updated AFTER UPDATE ON memory_memorynode
    FOR EACH ROW WHEN (OLD.tsv IS DISTINCT FROM NEW.tsv)
    EXECUTE FUNCTION memory_memorynode_words_changed();
"""
DROP_WORD_TRIGGERS = """
DROP TRIGGER memnode_words_updated ON memory_memorynode;
DROP FUNCTION memory_memorynode_words_changed();
DROP TRIGGER memnode_words_inserted ON memory_memorynode;
DROP FUNCTION memory_memorynode_words_added();
"""


class Migration(migrations.Migration):
    """The words memories have, so the full-text search asks only for forms that exist
    (1.5 s to fill at a million memories)."""

    dependencies = [("memory", "0010_owner_recall_indexes")]

    operations = [
        migrations.CreateModel(
            name="MemoryWord",
            fields=[("word", models.TextField(primary_key=True, serialize=False))],
        ),
        migrations.RunSQL(WORD_TRIGGERS, DROP_WORD_TRIGGERS),
        migrations.RunSQL(
            "INSERT INTO memory_memoryword (word) "
            "SELECT DISTINCT unnest(tsvector_to_array(tsv)) FROM memory_memorynode "
            "ON CONFLICT DO NOTHING",
            migrations.RunSQL.noop,
        ),
    ]
