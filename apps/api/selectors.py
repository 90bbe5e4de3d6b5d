from __future__ import annotations

import hashlib

from django.db.models.functions import MD5

from apps.chat.models import Conversation, Message

# How many of the newest conversations holding the client's last question are compared with its
# history (a question such as "hi" may start many of them).
CANDIDATES = 20


def _same(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


def conversation_sharing_history(*, user, turns: list[tuple[str, str]]) -> Conversation | None:
    """The user's conversation whose saved messages are the end of `turns` (role, text).

    An OpenAI client (Open WebUI) sends the whole history on every call and no conversation id:
    the call continues the conversation that holds that history. Only answers that completed
    count, as only those reached the client; the newest conversation wins a tie.

    Candidates are found by the client's last question, through an index on the md5 of each
    message's text: questions are saved as `_same` leaves them, while an answer is saved as the
    model wrote it (a trailing newline, say) and a client may send it back trimmed.
    """
    asked = next((_same(text) for role, text in reversed(turns) if role == "user"), None)
    if not asked:
        return None
    candidates = (
        Conversation.objects.alias(asked=MD5("messages__content"))
        .filter(
            owner=user,
            asked=hashlib.md5(asked.encode()).hexdigest(),
            messages__role=Message.Role.USER,
            messages__status=Message.Status.COMPLETE,
        )
        .distinct()
        .order_by("-updated_at", "-pk")[:CANDIDATES]
    )
    wanted = [(role, _same(text)) for role, text in turns]
    for conversation in candidates:
        # One more than the client sent is enough to tell a longer conversation apart.
        saved = [
            (role, _same(content))
            for role, content in conversation.messages.filter(
                status=Message.Status.COMPLETE, active=True
            ).values_list("role", "content")[: len(wanted) + 1]
        ]
        if saved and len(saved) <= len(wanted) and saved == wanted[-len(saved) :]:
            return conversation
    return None
