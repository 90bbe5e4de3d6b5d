from __future__ import annotations

from django.db import migrations, models

# One row per owner (0: the global memories), moved by each row that becomes current or stops
# being so. Inserts and deletes are counted once a statement, from its transition table, owner by
# owner in key order (a COPY of a million rows: one update per owner, where a row trigger updated
# each owner's counter row a thousand times in one transaction, every update slower than the one
# before). Updates are counted a row at a time with a WHEN, so that the updates a turn makes (its
# last access, a vector, a score) never call the function and need no transition table: only
# a change of validity or owner does. A transaction that writes an owner's memories holds that
# owner's counter row until it commits; the chat's reads never wait on it. TRUNCATE empties the
# counts with the table.
COUNT_TRIGGERS = """
CREATE FUNCTION memory_count_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_currentmemorycount AS counted (owner_key, rows)
        SELECT COALESCE(owner_id, 0), count(*) FROM inserted WHERE valid_to IS NULL
         GROUP BY 1 ORDER BY 1
        ON CONFLICT (owner_key) DO UPDATE SET rows = counted.rows + EXCLUDED.rows;
    ELSE
        INSERT INTO memory_currentmemorycount AS counted (owner_key, rows)
        SELECT COALESCE(owner_id, 0), -count(*) FROM deleted WHERE valid_to IS NULL
         GROUP BY 1 ORDER BY 1
        ON CONFLICT (owner_key) DO UPDATE SET rows = counted.rows + EXCLUDED.rows;
    END IF;
    RETURN NULL;
END
$$;
CREATE FUNCTION memory_count_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.valid_to IS NULL THEN
        INSERT INTO memory_currentmemorycount AS counted (owner_key, rows)
        VALUES (COALESCE(OLD.owner_id, 0), -1)
        ON CONFLICT (owner_key) DO UPDATE SET rows = counted.rows - 1;
    END IF;
    IF NEW.valid_to IS NULL THEN
        INSERT INTO memory_currentmemorycount AS counted (owner_key, rows)
        VALUES (COALESCE(NEW.owner_id, 0), 1)
        ON CONFLICT (owner_key) DO UPDATE SET rows = counted.rows + 1;
    END IF;
    RETURN NULL;
END
$$;
CREATE FUNCTION memory_count_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_currentmemorycount;
    RETURN NULL;
END
$$;
CREATE TRIGGER memnode_count_insert AFTER INSERT ON memory_memorynode
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION memory_count_statement();
CREATE TRIGGER memnode_count_delete AFTER DELETE ON memory_memorynode
    REFERENCING OLD TABLE AS deleted
    FOR EACH STATEMENT EXECUTE FUNCTION memory_count_statement();
CREATE TRIGGER memnode_count_update AFTER UPDATE OF owner_id, valid_to ON memory_memorynode
    FOR EACH ROW WHEN ((OLD.valid_to IS NULL OR NEW.valid_to IS NULL)
                       AND (OLD.valid_to IS DISTINCT FROM NEW.valid_to
                            OR OLD.owner_id IS DISTINCT FROM NEW.owner_id))
    EXECUTE FUNCTION memory_count_row();
CREATE TRIGGER memnode_count_truncate AFTER TRUNCATE ON memory_memorynode
    FOR EACH STATEMENT EXECUTE FUNCTION memory_count_truncated();
"""
DROP_COUNT_TRIGGERS = """
DROP TRIGGER memnode_count_insert ON memory_memorynode;
DROP TRIGGER memnode_count_delete ON memory_memorynode;
DROP TRIGGER memnode_count_update ON memory_memorynode;
DROP TRIGGER memnode_count_truncate ON memory_memorynode;
DROP FUNCTION memory_count_statement();
DROP FUNCTION memory_count_row();
DROP FUNCTION memory_count_truncated();
"""
# After the triggers, in the same transaction: creating them waits for every writer in flight
# and holds the next ones back until the counts are in.
BACKFILL = """
INSERT INTO memory_currentmemorycount (owner_key, rows)
SELECT COALESCE(owner_id, 0), count(*) FROM memory_memorynode WHERE valid_to IS NULL GROUP BY 1
"""


class Migration(migrations.Migration):
    """Each owner's count of current memories, kept by the database (see the model)."""

    dependencies = [("memory", "0011_owner_lexemes")]

    operations = [
        migrations.CreateModel(
            name="CurrentMemoryCount",
            fields=[
                ("owner_key", models.IntegerField(primary_key=True, serialize=False)),
                ("rows", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.RunSQL(COUNT_TRIGGERS, DROP_COUNT_TRIGGERS),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
