"""Background cognition tasks: thin, ids in, safe to run twice.

Every task is acks_late with reject-on-worker-lost (a killed worker's task comes back) and has
a time limit below the broker's visibility timeout. Transient LLM failures retry with
exponential backoff; when the last retry fails too, an error event says so. A reflection the
model answers unusably is asked again a few times, with backoff, then marked failed on its
messages; a refusal, a prompt too long or a fault of ours is marked failed at once, since asking
again would fail the same way (and a sweep would ask for ever). No turn is dropped without a
trace: each reply's trace holds its reflection's and its critic's outcome, and each stretch of
conversation ends in an episode or an EpisodeFailure. Reflection waits for a conversation to go
quiet and takes its waiting turns in one call (reflection_timing). A task whose call gave the
server's slot to the chat (`Preempted`) is queued again to run when the user is quiet
(`priority.again_when_preempted`), without spending its retries, and put off again while its
conversation still talks (`_put_off_while_talking`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from celery import shared_task
from celery.utils.time import get_exponential_backoff_interval
from django.core.cache import cache

from apps.chat.models import Message
from apps.cognition import critic, episodes, prompt_cache, reflection, reflection_timing, world
from apps.core.llm.outcomes import InvalidReply, Preempted, Refused, TooLong, Unreachable
from apps.core.llm.priority import again_when_preempted
from apps.core.selectors import runtime_config

logger = logging.getLogger(__name__)

# Unreachable: no answer, a timeout, a 5xx, a rate limit: the server may answer later.
TRANSIENT_LLM_ERRORS = (Unreachable,)

LLM_TASK = {
    "bind": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": TRANSIENT_LLM_ERRORS,
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 5,
    # A call may first wait for the chat (background_wait_seconds, 120 s) and then take its own
    # time (background_timeout_seconds, 180 s); the broker's visibility timeout is 900 s.
    "soft_time_limit": 400,
    "time_limit": 450,
}

# Attempts at a reflection whose replies are unusable, and the backoff between them (seconds).
INVALID_REPLY_ATTEMPTS = 3
INVALID_REPLY_BACKOFF = 5


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


@shared_task(
    name="cognition.reflect_when_quiet",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=50,
    time_limit=60,
)
def reflect_when_quiet(conversation_id: int, reply_id: int) -> None:
    """Queued `reflection_quiet_seconds` after each completed reply (reflection_timing)."""
    config = runtime_config()
    if not config.reflection_enabled:
        return
    if reflection_timing.reflection_due(
        conversation_id=conversation_id, reply_id=reply_id, config=config
    ):
        reflect_conversation.delay(conversation_id)


@shared_task(name="cognition.reflect_conversation", **LLM_TASK)
def reflect_conversation(
    self, conversation_id: int, invalid_replies: int = 0, preempted: int = 0
) -> None:
    """One reflection over the conversation's replies not yet reflected on; each is claimed,
    so a second run finds nothing left to do."""
    config = runtime_config()
    if not config.reflection_enabled:
        return
    if _put_off_while_talking(self, conversation_id=conversation_id, preempted=preempted):
        return
    with again_when_preempted(self, preempted=preempted):
        try:
            _reflect_waiting(self, conversation_id, invalid_replies=invalid_replies, config=config)
        except Preempted:
            reflection_timing.reflection_gave_way(conversation_id=conversation_id)
            raise


def _put_off_while_talking(task, *, conversation_id: int | None, preempted: int) -> bool:
    """Whether a task run again after giving way to the chat (`preempted`) is put off once
    more, the user still talking in its conversation: queued again for after the quiet, it asks
    the model then, not between two messages where the next one would preempt it again."""
    seconds = runtime_config().reflection_quiet_seconds
    if not preempted or not seconds or conversation_id is None:
        return False
    if reflection_timing.conversation_quiet(conversation_id=conversation_id, seconds=seconds):
        return False
    task.apply_async(args=task.request.args, kwargs=task.request.kwargs, countdown=seconds)
    return True


def _conversation_of(message_id: int) -> int | None:
    return Message.objects.filter(pk=message_id).values_list("conversation_id", flat=True).first()


def _reflect_waiting(task, conversation_id: int, *, invalid_replies: int, config) -> None:
    """The conversation's waiting replies, a call's worth; the next call's queued if more wait."""
    with _reflecting(conversation_id, task_id=task.request.id) as ours:
        if not ours:
            reflect_conversation.apply_async((conversation_id,), countdown=REFLECTING_AGAIN_SECONDS)
            return
        limit = reflection_timing.replies_per_call(config)
        reply_ids = reflection_timing.replies_waiting(conversation_id=conversation_id, limit=limit)
        if not reply_ids:
            return
        outcomes = _reflect(
            task, reply_ids=reply_ids, invalid_replies=invalid_replies, retry_args=[conversation_id]
        )
    if outcomes:
        reflection_timing.reflection_done(conversation_id=conversation_id)
    if outcomes and len(reply_ids) == limit:
        reflect_conversation.delay(conversation_id)


# Two workers reflecting on one conversation at once (a sweep beside a quiet check, with
# THALAMUS_BACKGROUND_CONCURRENCY above 1) would ask the model twice over the same replies and
# keep one answer: the second comes back once the first is done.
REFLECTING_AGAIN_SECONDS = 10


@contextmanager
def _reflecting(conversation_id: int, *, task_id: str) -> Iterator[bool]:
    """Whether the task `task_id` holds the conversation's reflection: a Redis key for as long
    as the task may run, taken again by the same task redelivered after its worker died."""
    key = f"cognition:reflecting:{conversation_id}"
    ours = cache.add(key, task_id, LLM_TASK["time_limit"]) or cache.get(key) == task_id
    try:
        yield ours
    finally:
        if ours:
            cache.delete(key)


@shared_task(name="cognition.reflect", **LLM_TASK)
def reflect(self, message_id: int, invalid_replies: int = 0, preempted: int = 0) -> None:
    """One reply alone: the task each reply queued before reflection waited for quiet, still
    in a queue after an upgrade."""
    with again_when_preempted(self, preempted=preempted):
        _reflect(
            self, reply_ids=[message_id], invalid_replies=invalid_replies, retry_args=[message_id]
        )


@shared_task(
    name="cognition.reflect_unreflected",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=100,
    time_limit=120,
)
def reflect_unreflected() -> int:
    """The beat's sweep: conversations with replies whose reflection was lost."""
    config = runtime_config()
    if not config.reflection_enabled:
        return 0
    due = reflection_timing.conversations_never_reflected(limit=config.batch_size)
    for conversation_id in due:
        reflect_conversation.delay(conversation_id)
    return len(due)


def _reflect(task, *, reply_ids: list[int], invalid_replies: int, retry_args: list) -> dict | None:
    """Reflect on `reply_ids` in one call: an unusable reply is asked again with backoff, an
    LLM error retried (LLM_TASK); after the last attempt the replies are marked failed."""
    attempts = task.request.retries + 1
    out_of_retries = task.request.retries >= task.max_retries
    try:
        outcomes = reflection.reflect_on_replies(
            reply_ids=reply_ids,
            attempts=attempts,
            last_attempt=out_of_retries or invalid_replies + 1 >= INVALID_REPLY_ATTEMPTS,
        )
    except InvalidReply as exc:
        countdown = get_exponential_backoff_interval(
            factor=INVALID_REPLY_BACKOFF, retries=invalid_replies, maximum=300, full_jitter=True
        )
        raise task.retry(
            exc=exc,
            countdown=countdown,
            args=retry_args,
            kwargs={"invalid_replies": invalid_replies + 1},
        ) from exc
    except Preempted:
        raise
    except TRANSIENT_LLM_ERRORS as exc:
        if not out_of_retries:
            raise
        error = f"gave up after {attempts} attempts: {exc}"
        if not any(reflection.reflectable_reply(reply_id) for reply_id in reply_ids):
            _fail_replies(reply_ids, error=error, attempts=attempts)
            return None
        # The rules still learn what they place in the user's words; the rest is failed.
        try:
            outcomes = reflection.reflect_without_model(
                reply_ids=reply_ids, error=error, attempts=attempts
            )
        except Exception as fault:  # a fault of ours: as below, never asked again
            _fail_replies(reply_ids, error=_unexpected(fault), attempts=attempts)
            return None
        if outcomes:
            _after_reflection(outcomes)
        return outcomes
    except Exception as exc:
        # A fault of ours, or the soft time limit: asking again would fail the same way, and
        # the sweep would ask for ever.
        _fail_replies(reply_ids, error=_unexpected(exc), attempts=attempts)
        return None
    if outcomes:
        _after_reflection(outcomes)
    return outcomes


def _unexpected(exc: Exception) -> str:
    logger.error("background step failed", exc_info=exc)
    return f"unexpected error: {type(exc).__name__}: {exc}"[:500]


def _fail_replies(reply_ids: list[int], *, error: str, attempts: int) -> None:
    replies = [reflection.reflectable_reply(reply_id) for reply_id in reply_ids]
    for reply in replies:
        if reply is not None:
            reflection.reflection_fail(reply=reply, error=error, attempts=attempts)
    if not any(replies):
        reflection.error_record(
            owner=_owner_of_message(reply_ids[0]), step="reflection", message_id=None, error=error
        )


def _after_reflection(outcomes: dict[int, dict]) -> None:
    """What a reflection starts: the critic on the memories each reply taught, and, when the
    conversation is due one, its episode summary."""
    if runtime_config().critic_enabled:
        for reply_id, outcome in outcomes.items():
            if outcome["created"] or outcome["updated"]:
                criticise.delay(reply_id)
    conversation_id = (
        Message.objects.filter(pk=next(iter(outcomes)))
        .values_list("conversation_id", flat=True)
        .first()
    )
    if conversation_id is not None:
        summarise_episode_if_due.delay(conversation_id)


@shared_task(name="cognition.change_world", **LLM_TASK)
def change_world(self, message_id: int, preempted: int = 0) -> None:
    """The world modifier on a saved reply's message, once (its failures are in the trace)."""
    conversation_id = _conversation_of(message_id)
    if _put_off_while_talking(self, conversation_id=conversation_id, preempted=preempted):
        return
    with again_when_preempted(self, preempted=preempted):
        world.world_change_after_reply(reply_id=message_id)


@shared_task(name="cognition.criticise", **LLM_TASK)
def criticise(self, message_id: int, preempted: int = 0) -> None:
    """A node the critic cannot judge is recorded as it goes (critic.criticise_turn); an LLM
    error is retried, and the last one, or a fault of ours, is recorded on the reply. Preempted,
    it goes on from the first node it had not judged."""
    conversation_id = _conversation_of(message_id)
    if _put_off_while_talking(self, conversation_id=conversation_id, preempted=preempted):
        return
    try:
        with again_when_preempted(self, preempted=preempted):
            critic.criticise_turn(message_id=message_id)
    except TRANSIENT_LLM_ERRORS as exc:
        if self.request.retries < self.max_retries:
            raise
        _critic_gives_up(message_id, f"gave up after {self.request.retries + 1} attempts: {exc}")
    except Exception as exc:
        _critic_gives_up(message_id, _unexpected(exc))


def _critic_gives_up(message_id: int, error: str) -> None:
    reflection.error_record(
        owner=_owner_of_message(message_id), step="critique", message_id=message_id, error=error
    )
    if Message.objects.filter(pk=message_id).exists():
        critic.critic_outcome_record(message_id=message_id, failed=[], error=error)


@shared_task(name="cognition.criticise_unreviewed", **LLM_TASK)
def criticise_unreviewed(self, preempted: int = 0) -> int:
    """The beat's sweep: volatile nodes no turn brought before the critic, a few per pass."""
    with (
        again_when_preempted(self, preempted=preempted),
        _last_retry_recorded(self, step="critique", owner_of=lambda: None),
    ):
        return len(critic.criticise_unreviewed(limit=critic.SWEEP_MAX_NODES))
    return 0


@shared_task(name="cognition.summarise_episode", **LLM_TASK)
def summarise_episode(
    self, conversation_id: int, invalid_replies: int = 0, preempted: int = 0
) -> None:
    """Unusable replies are asked again INVALID_REPLY_ATTEMPTS times, LLM errors retried up to
    max_retries, both with backoff; then the stretch is marked failed, so neither the sweep
    nor the next turn runs it again until the conversation moves on. Preempted, it is queued
    again (the parts of a long stretch already summarised stay episodes)."""
    if _put_off_while_talking(self, conversation_id=conversation_id, preempted=preempted):
        return
    attempts = self.request.retries + 1
    with again_when_preempted(self, preempted=preempted):
        try:
            episode = episodes.episode_summarise(conversation_id=conversation_id)
        except InvalidReply as exc:
            if invalid_replies + 1 >= INVALID_REPLY_ATTEMPTS:
                episodes.episode_give_up(
                    conversation_id=conversation_id, attempts=attempts, error=str(exc)
                )
                return
            countdown = get_exponential_backoff_interval(
                factor=INVALID_REPLY_BACKOFF, retries=invalid_replies, maximum=300, full_jitter=True
            )
            raise self.retry(
                exc=exc,
                countdown=countdown,
                args=[conversation_id],
                kwargs={"invalid_replies": invalid_replies + 1},
            ) from exc
        except TRANSIENT_LLM_ERRORS as exc:
            if self.request.retries < self.max_retries:
                raise
            episodes.episode_give_up(
                conversation_id=conversation_id, attempts=attempts, error=str(exc)
            )
        except (Refused, TooLong) as exc:
            # The server refuses this prompt; asking again would be refused the same way.
            episodes.episode_give_up(
                conversation_id=conversation_id, attempts=attempts, error=str(exc)
            )
        except Preempted:
            raise
        except Exception as exc:
            episodes.episode_give_up(
                conversation_id=conversation_id, attempts=attempts, error=_unexpected(exc)
            )
        else:
            # A stretch too long for one summary was summarised in part: the next part is due.
            if episode is not None and episodes.due_after_turn(conversation_id=conversation_id):
                summarise_episode.delay(conversation_id)


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


@shared_task(
    name="cognition.prime_prompt_cache", acks_late=True, soft_time_limit=100, time_limit=120
)
def prime_prompt_cache() -> bool:
    """Beat, every 15 minutes: the answers' shared start, which holds today's date, sent to the
    chat's server when it has not been within PRIME_EVERY_SECONDS (a new day, a server
    restarted, Ollama's slot taken by other work); web processes send it as they start."""
    return prompt_cache.prompt_cache_prime()
