"""The recall's guarantees on its owner-leading access paths (memory 0010): as many hits as the
user has rows up to 10, vector recall against an exact full-precision scan, every memory
reachable by its words, the graph in the renderer's order."""

from __future__ import annotations

import random
import statistics

import pytest
from django.db import connection
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone

from apps.memory import (
    episode_selectors,
    episode_services,
    graph_services,
    search_selectors,
    services,
)
from apps.memory.embedding import vector_literal
from apps.memory.models import SHORT_TEXT_MAX_BYTES, STEMMED_LANGUAGES, MemoryNode
from apps.memory.query_text import query_variants, query_words
from apps.memory.search_selectors import Weights, memory_search
from apps.memory.selectors import knowledge_triples_for, plan_and_knowledge

pytestmark = pytest.mark.django_db

DIM = 64
VECTOR_ONLY = Weights(vector=1.0, text=0.0, recency=0.0, importance=0.0, confidence=0.0)
WORDS = [
    "coffee",
    "garden",
    "jazz",
    "piano",
    "hiking",
    "rome",
    "paris",
    "dog",
    "cat",
    "pasta",
    "wine",
    "exam",
]


def _unit_vector(rng: random.Random) -> list[float]:
    vector = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(v * v for v in vector) ** 0.5
    return [v / norm for v in vector]


def _generate(django_user_model, sizes: list[int], *, globals_: int, seed: int) -> list[int]:
    """Users with the given numbers of memories (random vectors, words from WORDS) and global
    memories, inserted set-based with the owners' rows interleaved over the table."""
    users = django_user_model.objects.bulk_create(
        [django_user_model(username=f"scale{i}", password="!") for i in range(len(sizes))]
    )
    rng = random.Random(seed)
    rows = [(None, i) for i in range(globals_)]
    for user, size in zip(users, sizes, strict=True):
        rows += [(user.pk, i) for i in range(size)]
    rng.shuffle(rows)
    generated = [
        (owner, " ".join(rng.sample(WORDS, 3)), vector_literal(_unit_vector(rng)), n)
        for owner, n in rows
    ]
    # One statement: the table's statement triggers (memory counts, knowledge versions) run
    # once, as for any bulk write, not once a row (15,000 times, a minute on a loaded run).
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memory_memorynode
                (owner_id, description, kind, topic, fact_key, state, confidence_score,
                 importance, origin_context, embedding, embedding_status, embedding_model,
                 created_at)
            SELECT owner, description, 'fact', '', '', 'promoted', 1, 0.5, '', embedding::vector,
                   'ready', 'gen', now() - hours * interval '1 hour'
              FROM unnest(%s::int[], %s::text[], %s::text[], %s::int[])
                   AS generated(owner, description, embedding, hours)
            """,
            [list(column) for column in zip(*generated, strict=True)],
        )
        cursor.execute("ANALYZE memory_memorynode")
    return [user.pk for user in users]


def _visible(user_id: int) -> int:
    return MemoryNode.objects.filter(owner_id__in=[user_id], valid_to=None).count() + (
        MemoryNode.objects.filter(owner=None, valid_to=None).count()
    )


def _exact_top(user_id: int, vector: list[float], k: int) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT id FROM memory_memorynode
             WHERE (owner_id = %s::int OR owner_id IS NULL) AND valid_to IS NULL
             ORDER BY (embedding <=> %s::vector) + 0 LIMIT %s
            """,
            [user_id, vector_literal(vector), k],
        )
        return {row[0] for row in cursor.fetchall()}


def test_a_search_never_returns_fewer_than_min_10_and_the_users_rows(django_user_model):
    sizes = [0, 1, 4, 9, 10, 11, 37, 400]
    owners = _generate(django_user_model, sizes, globals_=0, seed=1)
    rng = random.Random(2)

    for owner, size in zip(owners, sizes, strict=True):
        for _ in range(5):
            text = " ".join(rng.sample(WORDS, 2))
            hits = memory_search(user_id=owner, text=text, vector=_unit_vector(rng), limit=10)
            assert len(hits) == min(10, size)
            assert {hit.is_global for hit in hits} <= {False}


def test_global_memories_count_among_the_rows_and_are_returned(django_user_model):
    sizes = [0, 3, 200]
    owners = _generate(django_user_model, sizes, globals_=4, seed=3)
    rng = random.Random(4)

    for owner, size in zip(owners, sizes, strict=True):
        hits = memory_search(user_id=owner, text="", vector=_unit_vector(rng), limit=10)
        assert len(hits) == min(10, size + 4) == min(10, _visible(owner))
        if size < 10:
            assert sum(hit.is_global for hit in hits) == 4


def test_a_word_all_of_a_users_memories_hold_finds_min_10_and_their_rows_without_a_vector(
    django_user_model,
):
    sizes = [1, 7, 10, 300]
    owners = _generate(django_user_model, sizes, globals_=0, seed=5)
    MemoryNode.objects.update(description=Concat(Value("shared "), F("description")))

    for owner, size in zip(owners, sizes, strict=True):
        hits = memory_search(user_id=owner, text="shared", vector=None, limit=10)
        assert len(hits) == min(10, size)


def test_vector_recall_at_10_against_exact_search_is_at_least_095(django_user_model):
    """30 users × 500 memories + 20 global ones, interleaved; 150 queries, each against an exact
    full-precision scan. The exact path ranks half-precision copies from an index."""
    owners = _generate(django_user_model, [500] * 30, globals_=20, seed=7)
    rng = random.Random(8)
    recalls = []
    for _ in range(150):
        owner, vector = rng.choice(owners), _unit_vector(rng)
        hits = memory_search(user_id=owner, text="", vector=vector, limit=10, weights=VECTOR_ONLY)
        assert len(hits) == 10
        recalls.append(len(_exact_top(owner, vector, 10) & {hit.id for hit in hits}) / 10)

    assert statistics.mean(recalls) >= 0.95


def test_the_half_precision_copy_follows_every_write_of_the_vector(user, llm_stub):
    node = services.memory_node_create(
        owner=user, description="The garden gate squeaks", source="admin"
    )
    vector = _unit_vector(random.Random(9))

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_memorynode SET embedding = %s::vector WHERE id = %s",
            [vector_literal(vector), node.pk],
        )
        cursor.execute(
            "SELECT embedding_half IS NOT NULL, embedding_half::vector <=> embedding "
            "FROM memory_memorynode WHERE id = %s",
            [node.pk],
        )
        present, distance = cursor.fetchone()
        assert present and distance < 1e-4
        cursor.execute("UPDATE memory_memorynode SET importance = 0.9 WHERE id = %s", [node.pk])
        cursor.execute("UPDATE memory_memorynode SET embedding = NULL WHERE id = %s", [node.pk])
        cursor.execute(
            "SELECT embedding_half IS NULL FROM memory_memorynode WHERE id = %s", [node.pk]
        )
        assert cursor.fetchone()[0]


def test_a_long_memory_is_found_by_its_words_like_a_short_one(user, llm_stub):
    long_text = "Notes from the trip: " + "we walked and talked for hours. " * 30
    assert len(long_text.encode()) > SHORT_TEXT_MAX_BYTES
    long = services.memory_node_create(
        owner=user, description=long_text + "Zanzibar at last.", source="admin"
    )
    short = services.memory_node_create(
        owner=user, description="Zanzibar has spice farms", source="admin"
    )

    hits = memory_search(user_id=user.pk, text="zanzibar", vector=None, limit=10)

    assert {hit.id for hit in hits} == {long.pk, short.pk}


def test_the_graph_read_gives_the_renderers_triples_in_its_order(user, other_user, llm_stub):
    graph_services.predicate_upsert(name="has_pet", category="relationships")
    graph_services.predicate_upsert(name="likes", category="preferences")
    for i in range(30):
        graph_services.triple_upsert(
            owner=user, subject="user", predicate="likes", object=f"dish {i}"
        )
        graph_services.triple_upsert(
            owner=other_user, subject="user", predicate="likes", object=f"x{i}"
        )
    graph_services.triple_upsert(owner=user, subject="user", predicate="has_pet", object="Argo")
    graph_services.triple_upsert(owner=None, subject="water", predicate="likes", object="nobody")

    _, triples = plan_and_knowledge(user_id=user.pk, conversation_id=None, limit=20)

    expected = list(knowledge_triples_for(user_id=user.pk, limit=20))
    assert [triple.id for triple in triples] == [triple.id for triple in expected]
    assert {triple.owner_id for triple in triples} == {user.pk}


@pytest.mark.parametrize(
    ("lookup_from_rows", "lookup_max_rows"),
    [(0, 256), (0, 0), (10**9, 256)],
    ids=["rows looked up", "forms looked up, rows scanned", "all forms scanned"],
)
def test_the_words_are_matched_in_every_form_any_visible_memory_has_and_no_other(
    user, other_user, llm_stub, monkeypatch, lookup_from_rows, lookup_max_rows
):
    """For a big owner the match tests rows only against the forms some current memory of the
    owner or a global one has (memory 0011), and reads the rows that have them from the same
    index while they are few: a form that only a global memory or a long one has is still
    matched, and one that only another user's or a superseded memory has matches nothing; the
    same as a small owner's match against every form."""
    monkeypatch.setattr(search_selectors, "FORM_LOOKUP_MIN_ROWS", lookup_from_rows)
    monkeypatch.setattr(search_selectors, "WORD_LOOKUP_MAX_ROWS", lookup_max_rows)
    long_text = "Notes from the holiday: " + "we walked and talked for hours. " * 30
    painted = services.memory_node_create(
        owner=user, description="I painted the fence", source="admin"
    )
    long = services.memory_node_create(
        owner=user, description=long_text + "Then the gardens.", source="admin"
    )
    services.memory_node_create(owner=user, description="Jazz on Fridays", source="admin")
    shared = services.memory_node_create(
        owner=None, description="The painter's workshop opens", source="admin"
    )
    services.memory_node_create(
        owner=other_user, description="Paints flowerpots every day", source="admin"
    )
    # Enough other memories that no word is in half of anyone's (such words pull nothing in).
    for text in ("Tea at five", "Chess on Sundays", "A cat called Miso", "Cycles to work"):
        services.memory_node_create(owner=user, description=text, source="admin")
        services.memory_node_create(owner=other_user, description=text, source="admin")
    old = services.memory_node_create(
        owner=user, description="Paintings of the garage", source="admin"
    )
    MemoryNode.objects.filter(pk=old.pk).update(valid_to=timezone.now())

    hits = memory_search(user_id=user.pk, text="painting garden flowerpot", vector=None, limit=10)
    theirs = memory_search(
        user_id=other_user.pk, text="painting garden flowerpot", vector=None, limit=10
    )

    # Memories made within a minute of a match come too, as its neighbours, with no text score.
    assert {hit.id for hit in hits if hit.components["text"]} == {painted.pk, long.pk, shared.pk}
    assert {hit.description for hit in theirs if hit.components["text"]} == {
        "Paints flowerpots every day",
        "The painter's workshop opens",
    }


def test_the_owners_words_index_has_no_pending_list_that_every_lookup_would_scan():
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'memnode_owner_lexemes'")
        assert cursor.fetchone()[0] == ["fastupdate=off"]


def _with_lemmas(text: str) -> list[str]:
    """The message's words and the words each is searched by, as the episode search asks them."""
    return list(dict.fromkeys(v for vs in query_variants(query_words(text)) for v in vs))


def test_the_episodes_rank_by_their_words_as_against_every_form_of_the_message(user, other_user):
    """The episode search drops from its query the word forms no episode of the owner has; each
    episode's text score stays what the whole query gives it (ts_rank_cd of every stem)."""
    summaries = [
        "Painted the garden fence with Anna",
        "Paints for the gardens, then a walk",
        "A painter came to look at the garage",
        "Talked about jazz and the piano lessons",
        "Booked the e-mail reminder for the dentist",
        "Nothing about the house at all",
    ]
    for summary in summaries:
        episode_services.episode_create(owner=user, summary=summary, embed=False)
    episode_services.episode_create(
        owner=other_user, summary="Painting gardens all day", embed=False
    )
    for text in ("painting the garden", "jazz pianos", "e-mail to the dentist", "gardening"):
        with connection.cursor() as cursor:
            cursor.execute(
                """
                WITH every_form AS (
                    SELECT string_agg(quote_literal(form), ' | ')::tsquery AS query
                      FROM unnest(%s::text[]) AS word
                     CROSS JOIN unnest(%s::regconfig[]) AS language
                     CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector(language, word)))
                           AS form
                )
                SELECT id, ts_rank_cd(tsv, query, 32) FROM memory_episode, every_form
                 WHERE owner_id = %s AND tsv @@ query
                """,
                [_with_lemmas(text), list(STEMMED_LANGUAGES), user.pk],
            )
            expected = {episode_id: rank for episode_id, rank in cursor.fetchall()}
        hits = episode_selectors.episode_search(user_id=user.pk, text=text, vector=None, limit=10)
        assert expected, text  # each query's words are in some episode
        assert {hit.id: hit.components["text"] for hit in hits if hit.components["text"]} == (
            pytest.approx(expected)
        )


def _actual_rows(plan: dict, cte: str) -> float:
    """The rows the named CTE produced, from an EXPLAIN (ANALYZE, FORMAT JSON) plan."""
    if plan.get("Subplan Name") == f"CTE {cte}":
        return plan["Actual Rows"]
    found = [_actual_rows(child, cte) for child in plan.get("Plans", [])]
    return max([rows for rows in found if rows is not None], default=None)


def test_a_common_word_is_ranked_in_a_bounded_window_and_a_rare_one_in_every_row(user):
    """8,000 memories, half of them with "turin" (a name or a city in every other memory), and
    two old ones with "zanzibar": the full text ranks the rows of the window and the rare word's,
    not the 4,000 with "turin", and still finds the old ones by their rare word."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memory_memorynode
                (owner_id, description, kind, topic, fact_key, state, confidence_score,
                 importance, origin_context, embedding_status, embedding_model, created_at)
            SELECT %s, CASE WHEN g %% 2 = 0 THEN 'Anna lives in Turin, note ' || g
                            ELSE 'Note ' || g END,
                   'fact', '', '', 'promoted', 1, 0.5, '', 'ready', 'gen',
                   now() - g * interval '1 hour'
              FROM generate_series(1, 8000) AS g
            """,
            [user.pk],
        )
        cursor.execute("ANALYZE memory_memorynode")
    old = [
        services.memory_node_create(owner=user, description=text, source="admin")
        for text in ("Turin to Zanzibar by ferry", "Zanzibar has spice farms")
    ]
    MemoryNode.objects.filter(pk__in=[node.pk for node in old]).update(
        created_at=timezone.now() - timezone.timedelta(days=1000)
    )
    text = "turin zanzibar"
    sql, params = search_selectors.memory_text_query(user_id=user.pk, text=text, limit=10)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0][0]["Plan"]

    hits = memory_search(user_id=user.pk, text=text, vector=None, limit=10)

    matching = MemoryNode.objects.filter(owner=user, description__icontains="turin").count()
    # Each row here has one of the words (one has both): a (row, word) pair each.
    ranked = _actual_rows(plan, "hits")
    bound = search_selectors.TEXT_WINDOW_ROWS + 2 * search_selectors.WORD_LOOKUP_MAX_ROWS
    assert matching > bound
    assert 0 < ranked <= bound
    assert [hit.id for hit in hits[:2]] == [old[0].pk, old[1].pk]


def test_a_short_memory_whose_words_stem_apart_in_every_language_fits_its_index_entry(user):
    """memnode_owner_recent_words holds a short memory's words in a B-tree entry (at most 2,704
    bytes): words each of the five stemmers cuts differently make the largest ones."""
    words = [f"{first}{vowel}ités" for first in "bcdfglmnprstv" for vowel in "aeiou"]
    text = " ".join(words)[: SHORT_TEXT_MAX_BYTES - 10].rsplit(" ", 1)[0]
    node = services.memory_node_create(owner=user, description=text, embed=False, source="admin")

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_size(tsv) FROM memory_memorynode WHERE id = %s", [node.pk])
        (size,) = cursor.fetchone()
    hits = memory_search(user_id=user.pk, text=words[0], vector=None, limit=10)

    assert len(text.encode()) > SHORT_TEXT_MAX_BYTES - 20
    assert 1500 < size < 2600
    assert [hit.id for hit in hits] == [node.pk]


def _sum_over_plan(plan: dict, key: str) -> float:
    return plan.get(key, 0) + sum(_sum_over_plan(child, key) for child in plan.get("Plans", []))


def test_a_search_reads_each_candidates_neighbours_by_range_when_one_owner_holds_the_table(
    django_user_model,
):
    """A single-user install: one owner with 3,000 memories, and so the whole table in the
    statistics. Each candidate's neighbours are read in a range of memnode_owner_recent; the
    planner once joined every row of the owner to every candidate instead (70 ms at 10k rows)."""
    (owner,) = _generate(django_user_model, [3000], globals_=0, seed=3)
    vector = _unit_vector(random.Random(3))
    match = search_selectors.memory_text_match(user_id=owner, text="garden", limit=10)
    sql, params = search_selectors.memory_ranking_query(match, vector=vector)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0][0]["Plan"]

    hits = memory_search(user_id=owner, text="garden", vector=vector, limit=10)

    assert len(hits) == 10
    # Each of at most 80 candidates reads its few neighbours, not the owner's 3,000 rows each.
    assert _sum_over_plan(plan, "Rows Removed by Join Filter") < 3000
    assert _sum_over_plan(plan, "Rows Removed by Filter") < 3000
