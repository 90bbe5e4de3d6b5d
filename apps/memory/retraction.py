"""What memory takes back when the user edits a message: what it learned only from the old text.

Reflection writes a turn's memories and facts with the turn's answer as their source (and lists
them in that answer's trace). When the user edits their message, the memories and facts whose
source is an answer to the old text are forgotten, unless another answer still on a branch shown
lists them (its message stated them too): those stay.
"""

from __future__ import annotations

from django.db import connection, transaction

from apps.memory import forget_services

# Another shown answer's reflection lists the row among what its turn created, updated or left
# as it was (memories), or among its facts.
_SUPPORTED = """
EXISTS (
    SELECT 1 FROM chat_message AS other
      JOIN chat_conversation AS c ON c.id = other.conversation_id
     WHERE c.owner_id = %(owner)s AND other.active AND other.role = 'assistant'
       AND other.reply_to_id IS DISTINCT FROM %(message)s
       AND ({lists})
)
"""
_MEMORY_LISTS = " OR ".join(
    f"other.trace -> 'reflection' -> '{key}' @> to_jsonb(n.id)"
    for key in ("created", "updated", "left", "quarantined")
)
_MEMORIES_SQL = f"""
SELECT n.id, n.description FROM memory_memorynode AS n
  JOIN chat_message AS answer ON answer.id = n.source_message_id
 WHERE n.owner_id = %(owner)s AND answer.reply_to_id = %(message)s AND n.valid_to IS NULL
   AND NOT {_SUPPORTED.format(lists=_MEMORY_LISTS)}
 ORDER BY n.id
"""
_TRIPLES_SQL = f"""
SELECT t.id, t.subject, p.name, t.object FROM memory_triple AS t
  JOIN memory_predicate AS p ON p.id = t.predicate_id
  JOIN chat_message AS answer ON answer.id = t.source_message_id
 WHERE t.owner_id = %(owner)s AND answer.reply_to_id = %(message)s AND t.valid_to IS NULL
   AND NOT {_SUPPORTED.format(lists="other.trace -> 'reflection' -> 'triples' @> to_jsonb(t.id)")}
 ORDER BY t.id
"""


@transaction.atomic
def memories_retract_said_in(*, owner_id: int, message_id: int) -> list[str]:
    """Forget the memories and facts learned only from the user's message `message_id` (see the
    module's docstring), with every trace of them; what went, as sentences."""
    params = {"owner": owner_id, "message": message_id}
    with connection.cursor() as cursor:
        cursor.execute(_MEMORIES_SQL, params)
        memories = cursor.fetchall()
        cursor.execute(_TRIPLES_SQL, params)
        triples = cursor.fetchall()
    if memories:
        forget_services.memories_forget(node_ids=[pk for pk, _ in memories])
    if triples:
        forget_services.triples_forget(owner_id=owner_id, triple_ids=[row[0] for row in triples])
    return [text for _, text in memories] + [
        f"{subject} {predicate} {value}" for _, subject, predicate, value in triples
    ]
