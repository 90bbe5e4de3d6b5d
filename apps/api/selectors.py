from __future__ import annotations

from apps.chat.models import Conversation, Message

# How many conversations ending with the client's last message are compared in full.
CANDIDATES = 5


def _same(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


def conversation_sharing_history(*, user, turns: list[tuple[str, str]]) -> Conversation | None:
    """The user's conversation whose saved messages are the end of `turns` (role, text).

    An OpenAI client (Open WebUI) sends the whole history on every call and no conversation id:
    the call continues the conversation that holds that history. Only answers that completed
    count, as only those reached the client; the newest conversation wins a tie.
    """
    if not turns:
        return None
    role, text = turns[-1]
    candidates = (
        Conversation.objects.filter(
            owner=user,
            messages__role=role,
            messages__content=_same(text),
            messages__status=Message.Status.COMPLETE,
        )
        .distinct()
        .order_by("-updated_at", "-pk")[:CANDIDATES]
    )
    wanted = [(role, _same(text)) for role, text in turns]
    for conversation in candidates:
        saved = [
            (role, _same(content))
            for role, content in conversation.messages.filter(
                status=Message.Status.COMPLETE
            ).values_list("role", "content")
        ]
        if saved and saved == wanted[-len(saved) :]:
            return conversation
    return None
