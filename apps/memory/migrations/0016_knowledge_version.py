from django.db import migrations, models

# One row per owner (0: the global graph) holding the last value drawn from one sequence for a
# change to that owner's triples. Inserts and deletes move it once a statement, from their
# transition tables, owner by owner in key order; an update moves it a row at a time, and only
# when something the turn shows changes (owner, subject, predicate, object, category,
# confidence, validity), so touching a triple's other columns costs nothing. A predicate's new
# name or labels change every owner's lines: they move key 0, which every reader checks. So
# does a TRUNCATE of the triples. The sequence belongs to no column, so that Django's test
# flush (TRUNCATE … RESTART IDENTITY) never winds it back to values a process has seen.
VERSION_TRIGGERS = """
CREATE SEQUENCE memory_knowledge_version_seq;
CREATE FUNCTION memory_knowledge_move(owner_keys int[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO memory_knowledgeversion AS known (owner_key, version)
    SELECT owner_key, nextval('memory_knowledge_version_seq')
      FROM (SELECT DISTINCT unnest(owner_keys) AS owner_key) AS owners
     ORDER BY owner_key
    ON CONFLICT (owner_key) DO UPDATE SET version = EXCLUDED.version;
$$;
CREATE FUNCTION memory_knowledge_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM memory_knowledge_move(ARRAY(SELECT COALESCE(owner_id, 0) FROM inserted));
    ELSE
        PERFORM memory_knowledge_move(ARRAY(SELECT COALESCE(owner_id, 0) FROM deleted));
    END IF;
    RETURN NULL;
END
$$;
CREATE FUNCTION memory_knowledge_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_knowledge_move(ARRAY[COALESCE(OLD.owner_id, 0), COALESCE(NEW.owner_id, 0)]);
    RETURN NULL;
END
$$;
CREATE FUNCTION memory_knowledge_everyone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_knowledge_move(ARRAY[0]);
    RETURN NULL;
END
$$;
CREATE TRIGGER triple_knowledge_insert AFTER INSERT ON memory_triple
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION memory_knowledge_statement();
CREATE TRIGGER triple_knowledge_delete AFTER DELETE ON memory_triple
    REFERENCING OLD TABLE AS deleted
    FOR EACH STATEMENT EXECUTE FUNCTION memory_knowledge_statement();
CREATE TRIGGER triple_knowledge_update AFTER UPDATE ON memory_triple
    FOR EACH ROW WHEN (OLD.owner_id IS DISTINCT FROM NEW.owner_id
                       OR OLD.subject IS DISTINCT FROM NEW.subject
                       OR OLD.predicate_id IS DISTINCT FROM NEW.predicate_id
                       OR OLD.object IS DISTINCT FROM NEW.object
                       OR OLD.category IS DISTINCT FROM NEW.category
                       OR OLD.confidence IS DISTINCT FROM NEW.confidence
                       OR OLD.valid_to IS DISTINCT FROM NEW.valid_to)
    EXECUTE FUNCTION memory_knowledge_row();
CREATE TRIGGER triple_knowledge_truncate AFTER TRUNCATE ON memory_triple
    FOR EACH STATEMENT EXECUTE FUNCTION memory_knowledge_everyone();
CREATE TRIGGER predicate_knowledge_update AFTER UPDATE ON memory_predicate
    FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name
                       OR OLD.labels IS DISTINCT FROM NEW.labels)
    EXECUTE FUNCTION memory_knowledge_everyone();
"""
DROP_VERSION_TRIGGERS = """
DROP TRIGGER triple_knowledge_insert ON memory_triple;
DROP TRIGGER triple_knowledge_delete ON memory_triple;
DROP TRIGGER triple_knowledge_update ON memory_triple;
DROP TRIGGER triple_knowledge_truncate ON memory_triple;
DROP TRIGGER predicate_knowledge_update ON memory_predicate;
DROP FUNCTION memory_knowledge_statement();
DROP FUNCTION memory_knowledge_row();
DROP FUNCTION memory_knowledge_everyone();
DROP FUNCTION memory_knowledge_move(int[]);
DROP SEQUENCE memory_knowledge_version_seq;
"""


class Migration(migrations.Migration):
    """Each owner's knowledge version, kept by the database (see the model)."""

    dependencies = [
        ("memory", "0015_vacuum_after_stemming"),
    ]

    operations = [
        migrations.CreateModel(
            name="KnowledgeVersion",
            fields=[
                ("owner_key", models.IntegerField(primary_key=True, serialize=False)),
                ("version", models.BigIntegerField()),
            ],
        ),
        migrations.RunSQL(VERSION_TRIGGERS, DROP_VERSION_TRIGGERS),
    ]
