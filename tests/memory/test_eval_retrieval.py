from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from apps.memory.evaluation import load_locomo

ROOT = Path(__file__).resolve().parents[2]

TINY_LOCOMO = [
    {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Ada",
            "speaker_b": "Bruno",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ada", "dia_id": "D1:1", "text": "I adopted a grey cat called Miso."},
                {"speaker": "Bruno", "dia_id": "D1:2", "text": "Lovely! Mine is a beagle."},
                {
                    "speaker": "Ada",
                    "dia_id": "D1:3",
                    "text": "Look at my painting.",
                    "blip_caption": "a watercolour of a lake at sunrise",
                },
            ],
            "session_2_date_time": "9:00 am on 2 June, 2023",
            "session_2": [
                {"speaker": "Bruno", "dia_id": "D2:1", "text": "I ran a charity race on Sunday."},
                {"speaker": "Ada", "dia_id": "D2:2", "text": "Well done! How far was it?"},
                {"speaker": "Bruno", "dia_id": "D2:3", "text": "Ten kilometres along the river."},
            ],
            "session_3_date_time": "10:00 am on 9 June, 2023",
        },
        "qa": [
            {"question": "What is Ada's cat called?", "answer": "Miso", "evidence": ["D1:1"],
             "category": 4},
            {"question": "When did Bruno run a race?", "answer": "May 2023",
             "evidence": ["D2:1; D2:3"], "category": 2},
            {"question": "What did Ada paint?", "answer": "a lake", "evidence": ["D:1:03"],
             "category": 1},
            {"question": "Which pets do both have?", "answer": "cat, dog", "evidence": ["D"],
             "category": 3},
            {"question": "What is Bruno's cat called?", "adversarial_answer": "Miso",
             "evidence": ["D1:1"], "category": 5},
        ],
    }
]  # fmt: skip


@pytest.fixture
def tiny_locomo(tmp_path) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(TINY_LOCOMO))
    return path


def test_it_reads_turns_dates_and_repairs_evidence_ids(tiny_locomo):
    dataset = load_locomo(tiny_locomo)

    [conversation] = dataset.conversations
    assert [turn.dia_id for turn in conversation.turns][:4] == ["D1:1", "D1:2", "D1:3", "D2:1"]
    assert (
        conversation.turns[0].description == "(8 May 2023) Ada: I adopted a grey cat called Miso."
    )
    assert "[shares a photo: a watercolour" in conversation.turns[2].description
    assert conversation.turns[1].said_at > conversation.turns[0].said_at
    assert [(q.category, sorted(q.evidence)) for q in conversation.questions] == [
        (4, ["D1:1"]),
        (2, ["D2:1", "D2:3"]),
        (1, ["D1:3"]),
    ]
    assert dataset.skipped_questions == 1  # "D" names no turn; category 5 is not counted


@pytest.mark.django_db
def test_each_turn_is_stored_as_made_and_valid_from_its_time(tiny_locomo):
    from apps.memory.evaluation import store_conversation
    from apps.memory.models import MemoryNode

    [conversation] = load_locomo(tiny_locomo).conversations

    _, dia_ids = store_conversation(
        conversation=conversation, vectors=[None] * len(conversation.turns), marker="test"
    )

    said_at = {turn.dia_id: turn.said_at for turn in conversation.turns}
    for node in MemoryNode.objects.filter(pk__in=dia_ids):
        assert node.created_at == node.valid_from == said_at[dia_ids[node.pk]]


@pytest.mark.django_db(transaction=True)
def test_the_command_scores_three_retrievers_on_a_throwaway_database(
    tiny_locomo, tmp_path, django_user_model
):
    db = settings.DATABASES["default"]
    out = tmp_path / "figures.json"
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}&port={db['PORT']}"
        ),
        "REDIS_URL": settings.REDIS_URL,
    }

    completed = subprocess.run(
        [sys.executable, "manage.py", "eval_retrieval", "--locomo", str(tiny_locomo)]
        + ["--json", str(out), "--embedder", "openai"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert completed.returncode == 0, completed.stderr
    assert "1 skipped" in completed.stdout
    figures = json.loads(out.read_text())
    for retriever in ("hybrid", "vector", "fulltext"):
        assert figures[retriever]["overall"]["questions"] == 3
        assert set(figures[retriever]["overall"]) == {
            "recall@5",
            "recall@10",
            "recall@20",
            "questions",
        }
        # Six turns: every evidence turn is among the top 20.
        assert figures[retriever]["overall"]["recall@20"] == 1.0
        assert {"multi-hop", "temporal", "single-hop"} <= set(figures[retriever])
    assert figures["run"]["skipped_questions"] == 1
    assert not django_user_model.objects.filter(username__startswith="locomo-").exists()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_database WHERE datname = %s", [f"{db['NAME']}_eval_retrieval"]
        )
        assert cursor.fetchone()[0] == 0


def _record(conversation: str, category: int, **recalls: float) -> dict:
    return {"conversation": conversation, "category": category, **recalls}


def test_folds_choose_on_the_tuning_conversations_and_score_the_held_back_ones():
    from apps.memory.evaluation import folds

    # "fits" is best on a, b and c and worst on d and e: a split that holds back d and e must
    # still choose it (chosen on a, b, c) and report its poor figure there.
    records = [
        *(_record(conv, 4, hybrid=0.5, fits=1.0) for conv in ("a", "b", "c")),
        *(_record(conv, 2, hybrid=0.5, fits=0.0) for conv in ("d", "e")),
    ]

    found = folds(records, ["hybrid", "fits"])

    assert len(found["folds"]) == 10  # every pair of five held back once
    held_de = next(f for f in found["folds"] if f["held_back"] == ["d", "e"])
    assert held_de["tuned_on"] == ["a", "b", "c"]
    assert held_de["chosen"] == "fits"
    assert held_de["tuning"]["overall"] == 1.0
    assert held_de["held_back_figures"]["overall"] == 0.0
    assert held_de["held_back_figures"]["temporal"] == 0.0
    assert held_de["held_back_hybrid"]["overall"] == 0.5
    # Tuned on c, d and e, "fits" scores 1/3 against 0.5: the configured weighting is chosen,
    # though "fits" would score 1.0 on the held-back a and b.
    held_ab = next(f for f in found["folds"] if f["held_back"] == ["a", "b"])
    assert held_ab["chosen"] == "hybrid"
    assert held_ab["held_back_figures"]["overall"] == 0.5
    assert found["per_conversation"]["d"]["fits"]["temporal"] == 0.0
    assert found["per_conversation"]["a"]["hybrid"]["single-hop"] == 0.5


def test_the_vector_cache_embeds_a_text_once_per_model(tmp_path):
    from apps.memory.evaluation import VectorCache, _embed_all

    class Counting:
        marker = "counting:2"
        dim = 2

        def __init__(self):
            self.embedded: list[str] = []

        def embed(self, texts):
            self.embedded += texts
            return [[float(len(text)), 1.0] for text in texts]

    path = tmp_path / "vectors.json"
    first = Counting()
    cache = VectorCache(path)
    assert _embed_all(first, ["ab", "abc"], lambda _: None, cache) == [[2.0, 1.0], [3.0, 1.0]]
    cache.save()

    second = Counting()
    vectors = _embed_all(second, ["abc", "abcd"], lambda _: None, VectorCache(path))

    assert vectors == [[3.0, 1.0], [4.0, 1.0]]
    assert second.embedded == ["abcd"]
    second.marker = "other:2"
    _embed_all(second, ["abc"], lambda _: None, VectorCache(path))
    assert second.embedded == ["abcd", "abc"]
