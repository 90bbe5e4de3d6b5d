from __future__ import annotations

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

# Each word of a memory, prefixed with its owner ("42~paint"; "g~paint" for a global memory): an
# index of these answers "does this owner have a current memory with this word?" from one short
# posting list, where an index of the bare words would intersect a word's postings over every
# owner with the owner's. The recall asks it of each form of the message's words and matches the
# owner's memories against the forms that are there (three or so out of forty-five). Computed, not
# stored: a forgotten memory's words leave with its row. Without GIN's pending list
# (fastupdate): each search looks up some forty-five forms, and every lookup would scan the list's
# up to 4 MB of recent entries; a memory's insert updates the index itself instead.
OWNER_LEXEMES_FUNCTION = """
CREATE FUNCTION memory_owner_lexemes(owner integer, words tsvector) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ARRAY(SELECT COALESCE(owner::text, 'g') || '~' || lexeme
                   FROM unnest(tsvector_to_array(words)) AS lexeme);
"""
DROP_OWNER_LEXEMES_FUNCTION = "DROP FUNCTION memory_owner_lexemes(integer, tsvector);"


class Migration(migrations.Migration):
    """The owner's words in a GIN index, built concurrently so that chats go on meanwhile."""

    atomic = False
    dependencies = [("memory", "0010_owner_recall_indexes")]

    operations = [
        migrations.RunSQL(OWNER_LEXEMES_FUNCTION, DROP_OWNER_LEXEMES_FUNCTION),
        AddIndexConcurrently(
            model_name="memorynode",
            index=django.contrib.postgres.indexes.GinIndex(
                models.Func(
                    models.F("owner"),
                    models.F("tsv"),
                    function="memory_owner_lexemes",
                    output_field=django.contrib.postgres.fields.ArrayField(models.TextField()),
                ),
                condition=models.Q(("valid_to__isnull", True)),
                fastupdate=False,
                name="memnode_owner_lexemes",
            ),
        ),
    ]
