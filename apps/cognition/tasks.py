"""Background cognition tasks: thin, ids in, safe to run twice.

Every task is acks_late with reject-on-worker-lost (a killed worker's task comes back) and has
a time limit below the broker's visibility timeout. Transient LLM failures retry with
exponential backoff; when the last retry fails too, an error event says so.
"""

from __future__ import annotations

from contextlib import contextmanager

import openai
from celery import shared_task

from apps.chat.models import Conversation, Message
from apps.cognition import critic, episodes, reflection
from apps.core.selectors import runtime_config

TRANSIENT_LLM_ERRORS = (
    openai.APIConnectionError,
    openai.APITimeoutError,
    openai.RateLimitError,
    openai.InternalServerError,
)

LLM_TASK = {
    "bind": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": TRANSIENT_LLM_ERRORS,
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 5,
    "soft_time_limit": 240,
    "time_limit": 300,
}


@contextmanager
def _last_retry_recorded(task, *, step: str, owner_of):
    try:
        yield
    except TRANSIENT_LLM_ERRORS as exc:
        if task.request.retries < task.max_retries:
            raise
        reflection.error_record(
            owner=owner_of(),
            step=step,
            message_id=None,
            error=f"gave up after {task.request.retries + 1} attempts: {exc}",
        )


def _owner_of_message(message_id: int):
    message = Message.objects.select_related("conversation__owner").filter(pk=message_id).first()
    return message.conversation.owner if message else None


def _owner_of_conversation(conversation_id: int):
    conversation = Conversation.objects.select_related("owner").filter(pk=conversation_id).first()
    return conversation.owner if conversation else None


@shared_task(name="cognition.reflect", **LLM_TASK)
def reflect(self, message_id: int) -> None:
    with _last_retry_recorded(
        self, step="reflection", owner_of=lambda: _owner_of_message(message_id)
    ):
        reflection.reflect_on_message(message_id=message_id)


@shared_task(name="cognition.criticise", **LLM_TASK)
def criticise(self, message_id: int) -> None:
    with _last_retry_recorded(
        self, step="critique", owner_of=lambda: _owner_of_message(message_id)
    ):
        critic.criticise_turn(message_id=message_id)


@shared_task(name="cognition.summarise_episode", **LLM_TASK)
def summarise_episode(self, conversation_id: int) -> None:
    with _last_retry_recorded(
        self, step="episode", owner_of=lambda: _owner_of_conversation(conversation_id)
    ):
        episodes.episode_summarise(conversation_id=conversation_id)


@shared_task(
    name="cognition.summarise_episode_if_due",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=50,
    time_limit=60,
)
def summarise_episode_if_due(conversation_id: int) -> None:
    if episodes.due_after_turn(conversation_id=conversation_id):
        summarise_episode.delay(conversation_id)


@shared_task(
    name="cognition.episodes_sweep",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=100,
    time_limit=120,
)
def episodes_sweep() -> int:
    config = runtime_config()
    due = episodes.idle_conversations(
        idle_minutes=config.episode_idle_minutes, limit=config.batch_size
    )
    for conversation_id in due:
        summarise_episode.delay(conversation_id)
    return len(due)
