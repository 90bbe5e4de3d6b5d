from __future__ import annotations

import pgvector.django
from django.contrib.postgres.indexes import GinIndex
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

# Kept by the database, so that every writer keeps it: the ORM, bulk SQL, COPY. Only a changed
# vector is converted, so an update of anything else stays a HOT update. A type change of
# `embedding` (manage.py reembed) rewrites no row and fires nothing; its reset of every row
# then empties the copies with the vectors.
HALF_VECTOR_TRIGGER = """
CREATE FUNCTION memory_memorynode_embedding_half() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.embedding IS DISTINCT FROM OLD.embedding THEN
        NEW.embedding_half := CASE WHEN vector_dims(NEW.embedding) <= 1280
                                   THEN NEW.embedding::halfvec END;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER memnode_embedding_half BEFORE INSERT OR UPDATE ON memory_memorynode
    FOR EACH ROW EXECUTE FUNCTION memory_memorynode_embedding_half();
"""
DROP_HALF_VECTOR_TRIGGER = """
DROP TRIGGER memnode_embedding_half ON memory_memorynode;
DROP FUNCTION memory_memorynode_embedding_half();
"""


class Migration(migrations.Migration):
    """Owner-leading indexes that a turn's recall reads instead of the tables: one owner's rows
    sit together in them, where in the tables they are spread over every page.

    Not atomic: the copies are filled in one statement and the indexes built concurrently, so
    chats go on meanwhile (the times per million memories are in docs/operations.md).
    """

    atomic = False
    dependencies = [("memory", "0009_episode_failures")]

    operations = [
        migrations.AddField(
            model_name="memorynode",
            name="embedding_half",
            field=pgvector.django.HalfVectorField(blank=True, editable=False, null=True),
        ),
        migrations.RunSQL(HALF_VECTOR_TRIGGER, DROP_HALF_VECTOR_TRIGGER),
        migrations.RunSQL(
            "UPDATE memory_memorynode SET embedding_half = embedding::halfvec "
            "WHERE embedding IS NOT NULL AND vector_dims(embedding) <= 1280",
            migrations.RunSQL.noop,
        ),
        AddIndexConcurrently(
            model_name="memorynode",
            index=models.Index(
                condition=models.Q(("valid_to__isnull", True)),
                fields=["owner"],
                include=("id", "kind", "embedding_half"),
                name="memnode_owner_vectors",
            ),
        ),
        AddIndexConcurrently(
            model_name="memorynode",
            index=models.Index(
                condition=models.Q(("valid_to__isnull", True)) & SHORT_TEXT,
                fields=["owner"],
                include=("id", "kind", "tsv"),
                name="memnode_owner_words",
            ),
        ),
        AddIndexConcurrently(
            model_name="memorynode",
            index=GinIndex(
                models.F("owner"),
                models.F("tsv"),
                condition=models.Q(("valid_to__isnull", True)) & ~SHORT_TEXT,
                name="memnode_owner_long_tsv",
            ),
        ),
        RemoveIndexConcurrently(model_name="memorynode", name="memnode_owner_tsv"),
        AddIndexConcurrently(
            model_name="memorynode",
            index=models.Index(
                condition=models.Q(("valid_to__isnull", True)),
                fields=["owner", "created_at"],
                include=("id", "kind"),
                name="memnode_owner_recent",
            ),
        ),
        AddIndexConcurrently(
            model_name="triple",
            index=models.Index(
                condition=models.Q(("valid_to__isnull", True)),
                fields=["owner", "category", "predicate", "-confidence", "id"],
                name="triple_owner_known",
            ),
        ),
    ]
