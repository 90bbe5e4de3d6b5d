from __future__ import annotations

import django.contrib.postgres.search
import django.db.models.functions.comparison
from django.contrib.postgres.indexes import GinIndex
from django.db import migrations, models
from django.db.models.lookups import LessThanOrEqual

LANGUAGES = ("english", "italian", "german", "french", "spanish")
# Stemmed five ways, the words of up to 360 bytes (not 500) fit a B-tree entry (models.py).
SHORT_TEXT = models.Q(
    LessThanOrEqual(
        models.Func("topic", function="octet_length", output_field=models.IntegerField())
        + models.Func("description", function="octet_length", output_field=models.IntegerField()),
        360,
    )
)
CURRENT = models.Q(("valid_to__isnull", True))
SHORT_TEXT_INDEXES = (
    "memnode_owner_long_tsv",
    "memnode_owner_recent_words",
    "memnode_owner_recent_long",
)


def _words_sql(*columns: str) -> str:
    text = " || ' ' || ".join(f"COALESCE({column}, '')" for column in columns)
    return " || ".join(f"to_tsvector('{language}'::regconfig, {text})" for language in LANGUAGES)


def _set_words(table: str, expression: str, old: str) -> migrations.RunSQL:
    return migrations.RunSQL(
        f"ALTER TABLE {table} ALTER COLUMN tsv SET EXPRESSION AS ({expression})",
        f"ALTER TABLE {table} ALTER COLUMN tsv SET EXPRESSION AS ({old})",
    )


class Migration(migrations.Migration):
    """The full text's words stemmed in each of the renderer's languages (issue #29 item 4):
    "study" finds "studies". Django cannot alter a generated column; PostgreSQL 17+ can, by
    rewriting the table and its indexes (seconds at 10k memories, minutes at a million, during
    which the table is locked). Memories keep no positions (nothing ranks by them)."""

    dependencies = [
        ("memory", "0013_owner_recent_words"),
    ]

    operations = [
        *[
            migrations.RemoveIndex(model_name="memorynode", name=name)
            for name in SHORT_TEXT_INDEXES
        ],
        migrations.SeparateDatabaseAndState(
            database_operations=[
                _set_words(
                    "memory_memorynode",
                    "strip(" + _words_sql("topic", "description") + ")",
                    "to_tsvector('simple'::regconfig, "
                    "COALESCE(topic, '') || ' ' || COALESCE(description, ''))",
                ),
                _set_words(
                    "memory_episode",
                    _words_sql("summary", "decisions", "outcome", "lesson"),
                    "to_tsvector('simple'::regconfig, COALESCE(summary, '') || ' ' "
                    "|| COALESCE(decisions, '') || ' ' || COALESCE(outcome, '') || ' ' "
                    "|| COALESCE(lesson, ''))",
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="episode",
                    name="tsv",
                    field=models.GeneratedField(
                        db_persist=True,
                        expression=models.Func(
                            models.Func(
                                models.Func(
                                    django.db.models.functions.comparison.Coalesce(
                                        "summary", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "decisions", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "outcome", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "lesson", models.Value("")
                                    ),
                                    arg_joiner=" || ' ' || ",
                                    template="%(expressions)s",
                                ),
                                template="to_tsvector('english'::regconfig, %(expressions)s)",
                            ),
                            models.Func(
                                models.Func(
                                    django.db.models.functions.comparison.Coalesce(
                                        "summary", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "decisions", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "outcome", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "lesson", models.Value("")
                                    ),
                                    arg_joiner=" || ' ' || ",
                                    template="%(expressions)s",
                                ),
                                template="to_tsvector('italian'::regconfig, %(expressions)s)",
                            ),
                            models.Func(
                                models.Func(
                                    django.db.models.functions.comparison.Coalesce(
                                        "summary", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "decisions", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "outcome", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "lesson", models.Value("")
                                    ),
                                    arg_joiner=" || ' ' || ",
                                    template="%(expressions)s",
                                ),
                                template="to_tsvector('german'::regconfig, %(expressions)s)",
                            ),
                            models.Func(
                                models.Func(
                                    django.db.models.functions.comparison.Coalesce(
                                        "summary", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "decisions", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "outcome", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "lesson", models.Value("")
                                    ),
                                    arg_joiner=" || ' ' || ",
                                    template="%(expressions)s",
                                ),
                                template="to_tsvector('french'::regconfig, %(expressions)s)",
                            ),
                            models.Func(
                                models.Func(
                                    django.db.models.functions.comparison.Coalesce(
                                        "summary", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "decisions", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "outcome", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "lesson", models.Value("")
                                    ),
                                    arg_joiner=" || ' ' || ",
                                    template="%(expressions)s",
                                ),
                                template="to_tsvector('spanish'::regconfig, %(expressions)s)",
                            ),
                            arg_joiner=" || ",
                            output_field=django.contrib.postgres.search.SearchVectorField(),
                            template="(%(expressions)s)",
                        ),
                        output_field=django.contrib.postgres.search.SearchVectorField(),
                    ),
                ),
                migrations.AlterField(
                    model_name="memorynode",
                    name="tsv",
                    field=models.GeneratedField(
                        db_persist=True,
                        expression=models.Func(
                            models.Func(
                                models.Func(
                                    django.db.models.functions.comparison.Coalesce(
                                        "topic", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "description", models.Value("")
                                    ),
                                    arg_joiner=" || ' ' || ",
                                    template="%(expressions)s",
                                ),
                                template="to_tsvector('english'::regconfig, %(expressions)s)",
                            ),
                            models.Func(
                                models.Func(
                                    django.db.models.functions.comparison.Coalesce(
                                        "topic", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "description", models.Value("")
                                    ),
                                    arg_joiner=" || ' ' || ",
                                    template="%(expressions)s",
                                ),
                                template="to_tsvector('italian'::regconfig, %(expressions)s)",
                            ),
                            models.Func(
                                models.Func(
                                    django.db.models.functions.comparison.Coalesce(
                                        "topic", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "description", models.Value("")
                                    ),
                                    arg_joiner=" || ' ' || ",
                                    template="%(expressions)s",
                                ),
                                template="to_tsvector('german'::regconfig, %(expressions)s)",
                            ),
                            models.Func(
                                models.Func(
                                    django.db.models.functions.comparison.Coalesce(
                                        "topic", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "description", models.Value("")
                                    ),
                                    arg_joiner=" || ' ' || ",
                                    template="%(expressions)s",
                                ),
                                template="to_tsvector('french'::regconfig, %(expressions)s)",
                            ),
                            models.Func(
                                models.Func(
                                    django.db.models.functions.comparison.Coalesce(
                                        "topic", models.Value("")
                                    ),
                                    django.db.models.functions.comparison.Coalesce(
                                        "description", models.Value("")
                                    ),
                                    arg_joiner=" || ' ' || ",
                                    template="%(expressions)s",
                                ),
                                template="to_tsvector('spanish'::regconfig, %(expressions)s)",
                            ),
                            arg_joiner=" || ",
                            output_field=django.contrib.postgres.search.SearchVectorField(),
                            template="strip(%(expressions)s)",
                        ),
                        output_field=django.contrib.postgres.search.SearchVectorField(),
                    ),
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="memorynode",
            index=GinIndex(
                models.F("owner"),
                models.F("tsv"),
                condition=CURRENT & ~SHORT_TEXT,
                name="memnode_owner_long_tsv",
            ),
        ),
        migrations.AddIndex(
            model_name="memorynode",
            index=models.Index(
                fields=["owner", "-created_at"],
                include=["id", "kind", "tsv"],
                condition=CURRENT & SHORT_TEXT,
                name="memnode_owner_recent_words",
            ),
        ),
        migrations.AddIndex(
            model_name="memorynode",
            index=models.Index(
                fields=["owner", "-created_at"],
                condition=CURRENT & ~SHORT_TEXT,
                name="memnode_owner_recent_long",
            ),
        ),
    ]
