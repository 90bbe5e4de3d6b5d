"""What several of memory's tables share: the embedding's status, the stemmed full-text columns
and the index expressions over them, and the sizes a B-tree index entry can hold."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.db.models.lookups import LessThanOrEqual

# The renderer's languages, whose snowball stemmers make the words of the full text: a word is
# kept in each language's stem ("studies" → "studi", "stud", "studies"), so that a message in any
# of them finds its other forms ("study" → "studi"). Irregular ones ("ran", "run") are found by
# the query's dictionary forms and their irregular forms (query_text.query_variants).
STEMMED_LANGUAGES = ("english", "italian", "german", "french", "spanish")


def stemmed_tsvector(*fields: str, positions: bool = True) -> models.Func:
    """The words of text columns, stemmed in each of STEMMED_LANGUAGES; `||` keeps it immutable
    (generated), CONCAT doesn't. Without positions where nothing ranks by them: smaller."""
    stemmed = [
        models.Func(
            models.Func(
                *[Coalesce(name, models.Value("")) for name in fields],
                template="%(expressions)s",
                arg_joiner=" || ' ' || ",
            ),
            template=f"to_tsvector('{language}'::regconfig, %(expressions)s)",
        )
        for language in STEMMED_LANGUAGES
    ]
    return models.Func(
        *stemmed,
        template="(%(expressions)s)" if positions else "strip(%(expressions)s)",
        arg_joiner=" || ",
        output_field=SearchVectorField(),
    )


def owner_lexemes(owner: str, words: str) -> models.Func:
    """The words of `words` prefixed with their owner ("42~paint", "g~paint" for global ones)."""
    return models.Func(
        models.F(owner),
        models.F(words),
        function="memory_owner_lexemes",
        output_field=ArrayField(models.TextField()),
    )


# A B-tree entry holds at most 2,704 bytes: a half-precision vector of up to this many dimensions
# fits next to its owner, id and kind.
HALF_VECTOR_MAX_DIM = 1280


# Memories whose words fit a B-tree entry: up to this many bytes of topic and description make a
# tsvector of at most about 2.3 kB, under the entry's 2,704 bytes, even for words each of the five
# stemmers cuts differently (3.2 kB for 490 bytes of them, tests/memory/test_recall_scale.py).
SHORT_TEXT_MAX_BYTES = 360
SHORT_TEXT = Q(
    LessThanOrEqual(
        models.Func("topic", function="octet_length", output_field=models.IntegerField())
        + models.Func("description", function="octet_length", output_field=models.IntegerField()),
        SHORT_TEXT_MAX_BYTES,
    )
)


class EmbeddingStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"
