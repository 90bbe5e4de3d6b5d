from __future__ import annotations

import hashlib

from apps.chat.models import Conversation, Message
from apps.core.db import RowModel, fetch_hot

# How many of the newest conversations holding the client's last question are compared with its
# history (a question such as "hi" may start many of them).
CANDIDATES = 20

_CONVERSATION = RowModel(Conversation)

# The candidates, newest first, each with its first `saved` completed messages. One statement,
# its parameters bound: the ORM's version of it cost about 4 ms of the web process's CPU a turn,
# on the path to the answer (building and compiling the query, then a second one per candidate).
_SHARING_SQL = f"""
SELECT {_CONVERSATION.columns("c")}, said.roles, said.contents
  FROM (SELECT DISTINCT c.id, c.updated_at
          FROM chat_message m
          JOIN chat_conversation c ON c.id = m.conversation_id
         WHERE md5(m.content) = %(asked)s
           AND m.role = %(user_role)s
           AND m.status = %(complete)s
           AND c.owner_id = %(owner)s
         ORDER BY c.updated_at DESC, c.id DESC
         LIMIT %(candidates)s) AS found
  JOIN chat_conversation c ON c.id = found.id
  CROSS JOIN LATERAL (
        SELECT array_agg(first.role ORDER BY first.created_at, first.id) AS roles,
               array_agg(first.content ORDER BY first.created_at, first.id) AS contents
          FROM (SELECT m.role, m.content, m.created_at, m.id
                  FROM chat_message m
                 WHERE m.conversation_id = c.id
                   AND m.status = %(complete)s
                   AND m.active
                 ORDER BY m.created_at, m.id
                 LIMIT %(saved)s) AS first) AS said
 ORDER BY found.updated_at DESC, found.id DESC
"""


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
    wanted = [(role, _same(text)) for role, text in turns]
    rows = fetch_hot(
        _SHARING_SQL,
        {
            "asked": hashlib.md5(asked.encode()).hexdigest(),
            "user_role": Message.Role.USER,
            "complete": Message.Status.COMPLETE,
            "owner": user.pk,
            "candidates": CANDIDATES,
            # One more than the client sent is enough to tell a longer conversation apart.
            "saved": len(wanted) + 1,
        },
        prepare=True,
    )
    for row in rows:
        *values, roles, contents = row
        # (None for a candidate none of whose messages is still active.)
        pairs = zip(roles or [], contents or [], strict=True)
        saved = [(role, _same(content)) for role, content in pairs]
        if saved and len(saved) <= len(wanted) and saved == wanted[-len(saved) :]:
            return _CONVERSATION.load(values)
    return None
