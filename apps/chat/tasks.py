from __future__ import annotations

from celery import shared_task

from apps.chat import broadcasts, conversation_services
from apps.chat.models import Conversation, Message, fallback_title
from apps.chat.selectors import later_reply
from apps.cognition.titles import generate_title
from apps.core.llm.outcomes import LLMError, Preempted
from apps.core.llm.priority import again_when_preempted
from apps.core.selectors import runtime_config


# A background LLM call may wait for the chat (background_wait_seconds) before its own time.
@shared_task(bind=True, acks_late=True, time_limit=450, soft_time_limit=400)
def title_conversation(
    self, conversation_id: int, reply_id: int | None = None, preempted: int = 0
) -> None:
    """Name a conversation from its first exchange; a truncation when the LLM cannot.

    Each complete reply `reply_id` of an untitled conversation queues this task to run once
    the conversation has been quiet for `reflection_quiet_seconds`, as reflection waits: when
    the user wrote again meanwhile, the later reply's own task names it. So the model is asked
    once the user pauses, not between two messages, where the next message would preempt it.
    Preempted all the same (by a message here or in another chat), it is asked again after
    the same quiet. Until then the conversation is called by the user's first words.

    A later reply still being written names the conversation once complete; should it fail
    instead, no task of its would, so this one looks again after the same quiet."""
    if reply_id is not None:
        later = later_reply(conversation_id=conversation_id, reply_id=reply_id)
        if later == "open":
            self.apply_async(
                args=(conversation_id, reply_id),
                kwargs={"preempted": preempted},
                countdown=runtime_config().reflection_quiet_seconds,
            )
        if later is not None:
            return
    with again_when_preempted(self, preempted=preempted):
        _title(conversation_id)


def _title(conversation_id: int) -> None:
    conversation = Conversation.objects.filter(pk=conversation_id, title="").first()
    if conversation is None:
        return
    first = list(conversation.messages.filter(status=Message.Status.COMPLETE).order_by("pk")[:2])
    if not first:
        return
    # Tasks of replies that overlap (a busy worker pool) ask the LLM once.
    if not conversation_services.conversation_title_claim(conversation_id=conversation_id):
        return
    try:
        title = generate_title(messages=first)
    except Preempted:
        conversation_services.conversation_title_release(conversation_id=conversation_id)
        raise
    except LLMError:
        title = ""
    title = title or fallback_title(first[0].content)
    if conversation_services.conversation_set_title_if_empty(
        conversation_id=conversation_id, title=title
    ):
        conversation.refresh_from_db()
        broadcasts.conversation_changed(conversation=conversation)


@shared_task(name="chat.delete_expired_temporary")
def delete_expired_temporary() -> int:
    """Beat, every 15 minutes: temporary chats go 24 hours after they were started."""
    return conversation_services.conversations_delete_expired()
