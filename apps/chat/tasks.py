from __future__ import annotations

from celery import shared_task

from apps.chat import broadcasts, conversation_services
from apps.chat.models import Conversation, Message
from apps.cognition.titles import generate_title
from apps.core.llm.outcomes import LLMError, Preempted
from apps.core.llm.priority import again_when_preempted


# A background LLM call may wait for the chat (background_wait_seconds) before its own time.
@shared_task(bind=True, acks_late=True, time_limit=450, soft_time_limit=400)
def title_conversation(self, conversation_id: int, preempted: int = 0) -> None:
    """Name a conversation from its first exchange; a truncation when the LLM cannot. Asked
    again later when its call gave the server to the chat."""
    with again_when_preempted(self, preempted=preempted):
        _title(conversation_id)


def _title(conversation_id: int) -> None:
    conversation = Conversation.objects.filter(pk=conversation_id, title="").first()
    if conversation is None:
        return
    first = list(conversation.messages.filter(status=Message.Status.COMPLETE).order_by("pk")[:2])
    if not first:
        return
    # Each reply until the title lands queues this task: the LLM is asked once.
    if not conversation_services.conversation_title_claim(conversation_id=conversation_id):
        return
    try:
        title = generate_title(messages=first)
    except Preempted:
        conversation_services.conversation_title_release(conversation_id=conversation_id)
        raise
    except LLMError:
        title = ""
    title = title or conversation_services.fallback_title(first[0].content)
    if conversation_services.conversation_set_title_if_empty(
        conversation_id=conversation_id, title=title
    ):
        conversation.refresh_from_db()
        broadcasts.conversation_changed(conversation=conversation)


@shared_task(name="chat.delete_expired_temporary")
def delete_expired_temporary() -> int:
    """Beat, every 15 minutes: temporary chats go 24 hours after they were started."""
    return conversation_services.conversations_delete_expired()
