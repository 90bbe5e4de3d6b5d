from __future__ import annotations

import random
import statistics
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.memory import search_selectors, services
from apps.memory.embedding import vector_literal
from apps.memory.models import MemoryNode
from apps.memory.search_selectors import Weights, memory_search

pytestmark = pytest.mark.django_db

DIM = 64
VECTOR_ONLY = Weights(vector=1.0, text=0.0, recency=0.0, importance=0.0, confidence=0.0)


def _random_unit_vector(rng: random.Random) -> list[float]:
    vector = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(v * v for v in vector) ** 0.5
    return [v / norm for v in vector]


def _bulk_memories(django_user_model, *, users: int, per_user: int, globals_: int = 0) -> list[int]:
    """Random-vector memories for many users, inserted set-based like the benchmark does."""
    created = django_user_model.objects.bulk_create(
        [django_user_model(username=f"bulk{i}", password="!") for i in range(users)]
    )
    ids = [user.pk for user in created]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO memory_memorynode
                (owner_id, description, kind, topic, fact_key, state, confidence_score,
                 importance, origin_context, embedding, embedding_status, embedding_model,
                 created_at)
            SELECT CASE WHEN g <= %(globals)s THEN NULL
                        ELSE (%(owners)s::int[])[1 + (g %% %(users)s)] END,
                   'bulk memory ' || g, 'fact', '', '', 'promoted', 1, 0.5, '',
                   (SELECT array_agg(random() - 0.5)::vector({DIM})
                      FROM generate_series(1, {DIM}) WHERE g > 0),
                   'ready', 'bulk', now() - g * interval '1 hour'
              FROM generate_series(1, %(total)s) AS g
            """,
            {
                "globals": globals_,
                "owners": ids,
                "users": users,
                "total": globals_ + users * per_user,
            },
        )
        cursor.execute("ANALYZE memory_memorynode")
    return ids


def _exact_top(user_id: int, vector: list[float], k: int, *, half: bool = False) -> list[int]:
    """The k nearest by a full scan, of the full vectors or of their half-precision copies,
    which the search scores by; equal distances go to the newer row, as in the search."""
    column, cast = ("embedding_half", "halfvec") if half else ("embedding", "vector")
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT id FROM memory_memorynode
             WHERE (owner_id = %s::int OR owner_id IS NULL) AND valid_to IS NULL
             ORDER BY ({column} <=> %s::vector::{cast}) + 0, id DESC LIMIT %s
            """,
            [user_id, vector_literal(vector), k],
        )
        return [row[0] for row in cursor.fetchall()]


def _owners(ids: list[int]) -> set[int | None]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT owner_id FROM memory_memorynode WHERE id = ANY(%s)", [ids])
        return {row[0] for row in cursor.fetchall()}


def test_a_users_search_never_returns_another_users_memories(user, other_user, llm_stub):
    mine = services.memory_node_create(
        owner=user, description="My cat is called Miso", source="admin"
    )
    services.memory_node_create(
        owner=other_user, description="My cat is called Pepper", source="admin"
    )
    shared = services.memory_node_create(
        owner=None, description="Cats are called felines", source="admin"
    )
    vector = [0.0] * DIM
    vector[0] = 1.0

    hits = memory_search(user_id=user.pk, text="cat called", vector=vector, limit=10)

    assert {hit.id for hit in hits} == {mine.pk, shared.pk}
    assert [hit.is_global for hit in hits if hit.id == shared.pk] == [True]


def test_superseded_values_are_not_retrieved(user, llm_stub):
    services.memory_node_create(
        owner=user, description="Lives in Rome", fact_key="city", source="admin"
    )
    current = services.memory_node_create(
        owner=user, description="Lives in Milan", fact_key="city", source="admin"
    )

    hits = memory_search(user_id=user.pk, text="lives Rome Milan", vector=None, limit=10)

    assert [hit.id for hit in hits] == [current.pk]


def test_a_memory_past_its_valid_until_is_not_recalled_before_decay_closes_it(user, llm_stub):
    past = services.memory_node_create(
        owner=user, description="Chemistry exam on Monday", source="admin"
    )
    services.memory_node_set_validity(node=past, valid_until=timezone.now() - timedelta(minutes=1))
    coming = services.memory_node_create(
        owner=user, description="Physics exam next month", source="admin"
    )
    services.memory_node_set_validity(node=coming, valid_until=timezone.now() + timedelta(days=30))

    hits = memory_search(user_id=user.pk, text="chemistry physics exam", vector=None, limit=10)

    assert MemoryNode.objects.get(pk=past.pk).valid_to is None  # decay has not run
    assert [hit.id for hit in hits] == [coming.pk]


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        ("study", "Studies law at night"),
        ("studies", "Wants to study law"),
        ("running", "Runs every morning"),
        ("studiare", "Lo studio della legge"),
        ("Bücher", "Liest jeden Abend ein Buch"),
        ("chansons", "Aime la chanson française"),
        ("canciones", "Canta una canción"),
    ],
)
def test_a_word_finds_its_other_forms_by_each_languages_stemmer(user, asked, said):
    found = services.memory_node_create(owner=user, description=said, embed=False, source="admin")
    services.memory_node_create(
        owner=user, description="Plays chess on Sundays", embed=False, source="admin"
    )

    hits = memory_search(user_id=user.pk, text=asked, vector=None, limit=10)

    assert [hit.id for hit in hits if hit.components["text"]] == [found.pk]


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        ("ran", "Will run a marathon"),
        ("mice", "Keeps a pet mouse"),
        ("children", "Reads to her child"),
        # The other way round: a memory's irregular form is found by its dictionary form and by
        # the other forms of it.
        ("run", "I ran the Turin half marathon"),
        ("running", "I ran the Turin half marathon"),
        ("mouse", "Two mice live in the shed"),
        ("going", "Went to Lisbon in May"),
    ],
)
def test_an_irregular_form_finds_its_dictionary_form(user, asked, said):
    """Snowball strips endings; it does not know that "ran" is a form of "run": the query's
    words are also searched by their dictionary forms and those forms' irregular forms
    (query_text.query_variants)."""
    found = services.memory_node_create(owner=user, description=said, embed=False, source="admin")
    services.memory_node_create(
        owner=user, description="Plays chess on Sundays", embed=False, source="admin"
    )

    hits = memory_search(user_id=user.pk, text=asked, vector=None, limit=10)

    assert [hit.id for hit in hits if hit.components["text"]] == [found.pk]


def test_hits_carry_their_score_components(user, llm_stub):
    services.memory_node_create(
        owner=user, description="Plays the cello on Sundays", source="admin"
    )

    [hit] = memory_search(user_id=user.pk, text="cello", vector=None, limit=5)

    assert set(hit.components) == {"vector", "text", "recency", "importance", "confidence"}
    assert hit.components["text"] > 0
    assert hit.components["recency"] == pytest.approx(1.0, abs=0.01)
    assert 0 < hit.score <= 1


def test_kinds_filter_the_candidates(user, llm_stub):
    services.memory_node_create(
        owner=user, description="Prefers tea", kind="preference", source="admin"
    )
    services.memory_node_create(
        owner=user, description="Tea comes from China", kind="fact", source="admin"
    )

    hits = memory_search(user_id=user.pk, text="tea", vector=None, limit=5, kinds=["preference"])

    assert [hit.kind for hit in hits] == ["preference"]


# The owner-leading indexes of current rows, which beat the HNSW index on a test-sized table.
DROP_OWNER_INDEXES = (
    "DROP INDEX memnode_owner_recent, memnode_owner_vectors, memnode_owner_recent_words, "
    "memnode_owner_recent_long, memnode_owner_lexemes"
)


def _take_the_big_table_path(monkeypatch) -> None:
    """Make a test-sized table take the path a big one takes: the filtered HNSW index scan.

    Every owner counts as big, and the planner may not sort a few thousand rows instead: read
    from the table, or through the owner-leading indexes of current rows, which at this size
    beat the HNSW index and at a million rows read the whole table (they are dropped with the
    test's transaction).
    """
    monkeypatch.setattr(search_selectors, "EXACT_SCAN_MAX_ROWS", 0)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # DDL waits for no deferred FK check
        cursor.execute(DROP_OWNER_INDEXES)
        cursor.execute("SET LOCAL enable_seqscan = off")


@pytest.fixture
def through_the_hnsw_index(monkeypatch):
    _take_the_big_table_path(monkeypatch)


def _ranking_query(user_id: int, vector: list[float]) -> tuple[str, dict]:
    """The scores' statement of a vector-only search (its words' half has nothing to match)."""
    match = search_selectors.memory_text_match(
        user_id=user_id, text="", limit=10, weights=VECTOR_ONLY
    )
    return search_selectors.memory_ranking_query(match, vector=vector)


def _plan(user_id: int, vector: list[float]) -> str:
    sql, params = _ranking_query(user_id, vector)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_without_iterative_scans_the_filtered_index_returns_fewer_than_k(
    django_user_model, through_the_hnsw_index
):
    owners = _bulk_memories(django_user_model, users=100, per_user=40)
    vector = _random_unit_vector(random.Random(3))
    sql, params = _ranking_query(owners[0], vector)

    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = off")
        cursor.execute(sql, params)
        assert len(cursor.fetchall()) < 10
    assert "memnode_embedding_hnsw" in _plan(owners[0], vector)


def test_a_user_with_k_memories_gets_k_back_from_the_filtered_hnsw_index(
    django_user_model, through_the_hnsw_index
):
    owners = _bulk_memories(django_user_model, users=100, per_user=40)
    rng = random.Random(4)
    assert "memnode_embedding_hnsw" in _plan(owners[0], _random_unit_vector(rng))

    for owner in owners[:20]:
        hits = memory_search(
            user_id=owner, text="", vector=_random_unit_vector(rng), limit=10, weights=VECTOR_ONLY
        )
        assert len(hits) == 10
        assert _owners([hit.id for hit in hits]) == {owner}


def test_filtered_vector_recall_at_10_is_at_least_095_on_both_paths(django_user_model, monkeypatch):
    """50 users × 80 memories + 20 global ones; 100 queries, each against exact search."""
    owners = _bulk_memories(django_user_model, users=50, per_user=80, globals_=20)
    rng = random.Random(7)
    queries = [(rng.choice(owners), _random_unit_vector(rng)) for _ in range(100)]

    def recall(*, half: bool = False) -> float:
        found = []
        for owner, vector in queries:
            truth = set(_exact_top(owner, vector, 10, half=half))
            hits = memory_search(
                user_id=owner, text="", vector=vector, limit=10, weights=VECTOR_ONLY
            )
            found.append(len(truth & {hit.id for hit in hits}) / 10)
        return statistics.mean(found)

    # An exact scan (100 visible rows per user) of the half-precision copies, which order as the
    # full vectors do but for near-ties at the tenth place.
    assert recall(half=True) == 1.0
    assert recall() >= 0.99
    _take_the_big_table_path(monkeypatch)
    assert "memnode_embedding_hnsw" in _plan(owners[0], queries[0][1])
    assert recall() >= 0.95


def test_a_big_owner_goes_through_the_hnsw_index_with_recall_and_k_back(
    django_user_model, monkeypatch
):
    """4000 rows per owner above a 3000-row exact-scan limit: the HNSW index path."""
    monkeypatch.setattr(search_selectors, "EXACT_SCAN_MAX_ROWS", 3000)
    with connection.cursor() as cursor:
        # Building the index once is much faster than growing it row by row.
        cursor.execute("DROP INDEX memnode_embedding_hnsw")
        owners = _bulk_memories(django_user_model, users=2, per_user=4000, globals_=20)
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # DDL waits for no deferred FK check
        cursor.execute(
            "CREATE INDEX memnode_embedding_hnsw ON memory_memorynode "
            "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        # At this table size a sequential scan (or one of an owner-leading index) would win; at
        # the size it stands for, it doesn't.
        cursor.execute(DROP_OWNER_INDEXES)
        cursor.execute("SET LOCAL enable_seqscan = off")
    rng = random.Random(11)
    queries = [(rng.choice(owners), _random_unit_vector(rng)) for _ in range(30)]
    assert search_selectors.EXACT_SCAN_MAX_ROWS < 4000
    assert "memnode_embedding_hnsw" in _plan(owners[0], queries[0][1])

    found = []
    for owner, vector in queries:
        hits = memory_search(user_id=owner, text="", vector=vector, limit=10, weights=VECTOR_ONLY)
        assert len(hits) == 10
        assert _owners([hit.id for hit in hits]) <= {owner, None}
        found.append(len(set(_exact_top(owner, vector, 10)) & {hit.id for hit in hits}) / 10)
    assert statistics.mean(found) >= 0.95


def test_the_neighbour_weight_and_window_come_from_the_runtime_config(user):
    from datetime import timedelta

    from apps.core.models import RuntimeConfig
    from apps.core.selectors import forget_runtime_config
    from apps.memory.models import MemoryNode

    match = services.memory_node_create(
        owner=user, description="Argo is afraid of thunder", source="admin"
    )
    nearby = services.memory_node_create(
        owner=user, description="We stayed inside all evening", source="admin"
    )
    MemoryNode.objects.filter(pk=nearby.pk).update(
        created_at=match.created_at + timedelta(seconds=10)
    )
    rng = random.Random(7)
    query = _random_unit_vector(rng)
    with connection.cursor() as cursor:  # both are vector candidates; only one matches the words
        cursor.execute(
            "UPDATE memory_memorynode SET embedding = %s::vector WHERE id IN (%s, %s)",
            [vector_literal(_random_unit_vector(rng)), match.pk, nearby.pk],
        )

    def nearby_hit():
        forget_runtime_config()
        hits = memory_search(user_id=user.pk, text="thunder", vector=query, limit=10)
        return next(hit for hit in hits if hit.id == nearby.pk)

    config = RuntimeConfig.objects.order_by("pk").first() or RuntimeConfig()
    config.save()
    with_neighbours = nearby_hit()
    RuntimeConfig.objects.update(weight_context=0.0)
    alone = nearby_hit()
    RuntimeConfig.objects.update(weight_context=0.5, neighbour_seconds=5)
    out_of_reach = nearby_hit()

    assert with_neighbours.context > 0  # the thunder memory, 10 s away, lends it its score
    assert with_neighbours.score > alone.score
    assert out_of_reach.context == 0  # 10 s apart is beyond a 5 s window


def test_named_dates_reads_days_months_years_and_periods_relative_to_now():
    from datetime import UTC, datetime

    from apps.memory.query_text import named_dates

    now = datetime(2026, 11, 24, 15, 0, tzinfo=UTC)  # a Tuesday
    day = named_dates("What did she say on 8 May, 2023?", now=now)
    month = named_dates("What did Mel paint in July 2023?", now=now)
    last_week = named_dates("Where did we go last week?", now=now)

    assert day.spans == [(datetime(2023, 5, 8, tzinfo=UTC), datetime(2023, 5, 9, tzinfo=UTC))]
    assert month.spans == [(datetime(2023, 7, 1, tzinfo=UTC), datetime(2023, 8, 1, tzinfo=UTC))]
    assert named_dates("When did Melanie go camping in June?", now=now).months == [6]
    assert named_dates("How often to the beach in 2023?", now=now).spans == [
        (datetime(2023, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC))
    ]
    assert last_week.spans == [
        (datetime(2026, 11, 16, tzinfo=UTC), datetime(2026, 11, 23, tzinfo=UTC))
    ]
    assert not named_dates("May I ask what you think of March?", now=now)


def test_a_memory_made_in_the_month_a_question_names_outranks_a_more_recent_one(user, llm_stub):
    from datetime import UTC, datetime

    from apps.memory.models import MemoryNode

    july = services.memory_node_create(
        owner=user, description="We went camping by the lake", source="admin"
    )
    may = services.memory_node_create(
        owner=user, description="We went camping in the hills", source="admin"
    )
    MemoryNode.objects.filter(pk=july.pk).update(created_at=datetime(2023, 7, 9, tzinfo=UTC))
    MemoryNode.objects.filter(pk=may.pk).update(created_at=datetime(2023, 5, 2, tzinfo=UTC))

    undated = memory_search(user_id=user.pk, text="went camping", vector=None, limit=2)
    dated = memory_search(user_id=user.pk, text="went camping in May 2023", vector=None, limit=2)

    assert [hit.id for hit in undated] == [july.pk, may.pk]  # the more recent
    assert [hit.id for hit in dated] == [may.pk, july.pk]


def test_an_answer_next_to_the_question_is_found_though_it_shares_no_word_with_it(user, llm_stub):
    from datetime import timedelta

    from apps.memory.models import MemoryNode

    question = services.memory_node_create(
        owner=user, description="Who is your favourite player?", source="admin"
    )
    answer = services.memory_node_create(
        owner=user, description="LeBron, no doubt about it", source="admin"
    )
    MemoryNode.objects.filter(pk=answer.pk).update(
        created_at=question.created_at + timedelta(seconds=30)
    )

    hits = memory_search(user_id=user.pk, text="favourite player", vector=None, limit=5)

    assert [hit.id for hit in hits] == [question.pk, answer.pk]
    assert hits[1].components["text"] == 0 and hits[1].context > 0


def test_a_small_owners_generic_plan_ranks_as_the_plan_made_for_its_parameters(
    django_user_model, user
):
    """An owner with fewer than FORM_LOOKUP_MIN_ROWS visible rows has both statements of a search
    prepared, so PostgreSQL may run one generic plan for every such owner. Beside an owner who
    holds most of the table, that plan finds and ranks the small owner's memories exactly as
    plans made for each search's own parameters do."""
    _bulk_memories(django_user_model, users=1, per_user=3000)
    rng = random.Random(11)
    words = ["bees", "orchard", "violin", "harbour", "lemon", "tram", "garden", "winter"]
    with connection.cursor() as cursor:
        for index in range(40):
            cursor.execute(
                """
                INSERT INTO memory_memorynode
                    (owner_id, description, kind, topic, fact_key, state, confidence_score,
                     importance, origin_context, embedding, embedding_status, embedding_model,
                     created_at)
                VALUES (%s, %s, 'fact', '', '', 'promoted', 1, 0.5, '', %s::vector, 'ready',
                        'bulk', now() - %s * interval '1 day')
                """,
                [
                    user.pk,
                    " ".join(rng.sample(words, 3)),
                    vector_literal(_random_unit_vector(rng)),
                    index,
                ],
            )
        cursor.execute("ANALYZE memory_memorynode")
    queries = [(" ".join(rng.sample(words, 2)), _random_unit_vector(rng)) for _ in range(8)]

    def ranked(plan_cache_mode: str) -> list[list[tuple[int, float]]]:
        with connection.cursor() as cursor:
            cursor.execute(f"SET plan_cache_mode = {plan_cache_mode}")
        return [
            [
                (hit.id, round(hit.score, 6))
                for hit in memory_search(user_id=user.pk, text=text, vector=vector, limit=10)
            ]
            for text, vector in queries
        ]

    custom = ranked("force_custom_plan")
    generic = ranked("force_generic_plan")
    with connection.cursor() as cursor:
        cursor.execute("RESET plan_cache_mode")
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert all(len(hits) == 10 for hits in custom)
    assert generic == custom
    assert {user.pk} == _owners([id for hits in custom for id, _ in hits])
    assert sum(search_selectors.FEW_ROWS_MARK in text for text in prepared) == 2
