"""LLM call metrics per role and model, and what found the memories reflection wrote (the
rules, the model or both), summed over every process of the instance.

Each process (web, Celery workers) writes its counts to files of its own in
settings.THALAMUS_METRICS_DIR (prometheus_client's multiprocess mode; settings point
PROMETHEUS_MULTIPROC_DIR there before importing it); /metrics and the admin's
"LLM metrics" page read them all. Only counters and histograms: they need no bookkeeping when a
process dies (`multiprocess.mark_process_dead` is for live gauges), and `up` clears the
directory when it starts.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from dataclasses import dataclass, field

from django.conf import settings

# prometheus_client chooses multiprocess mode, and where, once: when it is first imported. So
# the rest of Thalamus imports this module, never prometheus_client itself.
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(settings.THALAMUS_METRICS_DIR)
with contextlib.suppress(OSError):  # then record_llm_call logs why it cannot count
    settings.THALAMUS_METRICS_DIR.mkdir(parents=True, exist_ok=True)
from prometheus_client import (  # noqa: E402
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

logger = logging.getLogger(__name__)

# From a cached short answer to a long one from a CPU-bound local model.
SECONDS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, math.inf)

REQUESTS = Counter(
    "thalamus_llm_requests",
    "LLM requests by role, model and outcome (ok or error).",
    ["role", "model", "outcome"],
)
TOKENS = Counter(
    "thalamus_llm_tokens",
    "Tokens the LLM server reported: in (prompt) and out (completion).",
    ["role", "model", "direction"],
)
TTFT = Histogram(
    "thalamus_llm_ttft_seconds",
    "Seconds from the request to the first token of the reply.",
    ["role", "model"],
    buckets=SECONDS_BUCKETS,
)
LATENCY = Histogram(
    "thalamus_llm_latency_seconds",
    "Seconds from the request to the end of the reply (or its failure).",
    ["role", "model"],
    buckets=SECONDS_BUCKETS,
)
ERRORS = Counter(
    "thalamus_llm_errors",
    "Failed LLM requests by kind (the exception's class).",
    ["role", "model", "kind"],
)

MEMORIES_FOUND = Counter(
    "thalamus_memories_found",
    "Memories reflection wrote, by what found them (rules, model or both) and what it did "
    "(created, updated, confirmed, held for approval, proposed for confirmation).",
    ["found_by", "outcome"],
)


def record_memory_found(*, found_by: str, outcome: str) -> None:
    """Count one memory reflection wrote; never raises, as record_llm_call."""
    try:
        MEMORIES_FOUND.labels(found_by, outcome).inc()
    except Exception:  # noqa: BLE001 — a metrics failure must not break a reflection.
        logger.exception("recording a memory's metrics failed")


def error_kind(exc: BaseException) -> str:
    """The `kind` label of a failed call: its exception's class (InternalServerError,
    APITimeoutError, APIConnectionError…)."""
    return type(exc).__name__.lstrip("_")


def record_llm_call(
    *,
    role: str,
    model: str,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    ttft_s: float | None,
    latency_s: float | None,
    error: str | None,
) -> None:
    """Count one LLM request; `error` is its kind (see `error_kind`), None when it succeeded.

    Never raises: a metrics failure (an unwritable directory) must not break a turn.
    """
    try:
        REQUESTS.labels(role, model, "error" if error else "ok").inc()
        if prompt_tokens:
            TOKENS.labels(role, model, "in").inc(prompt_tokens)
        if completion_tokens:
            TOKENS.labels(role, model, "out").inc(completion_tokens)
        if ttft_s is not None:
            TTFT.labels(role, model).observe(ttft_s)
        if latency_s is not None:
            LATENCY.labels(role, model).observe(latency_s)
        if error:
            ERRORS.labels(role, model, error).inc()
    except Exception:  # noqa: BLE001 — see the docstring.
        logger.exception("recording an LLM call's metrics failed")


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(settings.THALAMUS_METRICS_DIR))
    return registry


METRICS_CONTENT_TYPE = CONTENT_TYPE_LATEST


def metrics_text() -> bytes:
    """Every process's metrics in the Prometheus text format."""
    return generate_latest(_registry())


# ------------------------------------------------------------------ the admin's table


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """The q-quantile of a histogram from its cumulative buckets [(upper bound, count)], as
    Prometheus' histogram_quantile estimates it: linear within the bucket the rank falls in;
    in the +Inf bucket, the highest finite bound. None for an empty histogram."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] == 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower
            if count == below:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return lower


@dataclass
class _Timing:
    count: float = 0.0
    total: float = 0.0
    buckets: dict[float, float] = field(default_factory=dict)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    @property
    def p95(self) -> float | None:
        return histogram_quantile(0.95, list(self.buckets.items()))


@dataclass
class LlmMetricsRow:
    role: str
    model: str
    requests: float = 0.0
    errors: float = 0.0
    tokens_in: float = 0.0
    tokens_out: float = 0.0
    ttft: _Timing = field(default_factory=_Timing)
    latency: _Timing = field(default_factory=_Timing)


def llm_metrics_rows() -> list[LlmMetricsRow]:
    """One row per role and model, summed over every process, sorted by role and model."""
    rows: dict[tuple[str, str], LlmMetricsRow] = {}

    def row(labels: dict) -> LlmMetricsRow:
        key = (labels["role"], labels["model"])
        if key not in rows:
            rows[key] = LlmMetricsRow(*key)
        return rows[key]

    timings = {"thalamus_llm_ttft_seconds": "ttft", "thalamus_llm_latency_seconds": "latency"}
    for family in _registry().collect():
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "thalamus_llm_requests_total":
                row(labels).requests += sample.value
                if labels["outcome"] == "error":
                    row(labels).errors += sample.value
            elif sample.name == "thalamus_llm_tokens_total":
                target = row(labels)
                if labels["direction"] == "in":
                    target.tokens_in += sample.value
                else:
                    target.tokens_out += sample.value
            elif family.name in timings:
                timing: _Timing = getattr(row(labels), timings[family.name])
                suffix = sample.name.removeprefix(family.name)
                if suffix == "_count":
                    timing.count += sample.value
                elif suffix == "_sum":
                    timing.total += sample.value
                elif suffix == "_bucket":
                    bound = float(labels["le"])
                    timing.buckets[bound] = timing.buckets.get(bound, 0.0) + sample.value
    return [rows[key] for key in sorted(rows)]
