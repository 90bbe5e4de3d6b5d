"""Import tasks: thin, an import's id in, one bounded batch each, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from apps.cognition.tasks import LLM_TASK
from apps.imports import services


@shared_task(
    name="imports.read",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=100,
    time_limit=120,
)
def read(import_id: int) -> None:
    services.import_read_batch(import_id=import_id)


@shared_task(name="imports.learn", **LLM_TASK)
def learn(self, import_id: int) -> None:
    services.import_learn_batch(import_id=import_id)


@shared_task(
    name="imports.resume_stalled",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=50,
    time_limit=60,
)
def resume_stalled() -> int:
    """The beat's sweep: imports whose worker stopped mid-way go on where they were."""
    return len(services.imports_resume_stalled())
