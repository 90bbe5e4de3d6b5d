"""What memory forgets, taken out of the answers' traces that quote it.

An answer's trace lists the memories, episodes and triples it used (under "memory"), the note
its message was sent with (under "note", which quotes them), the memories reflection wrote from
its turn with the quotes it rejected (under "reflection"), and what may paraphrase any memory:
the retrieval plan's steps (under "memory", "plan") and the internal debate's draft and review
(under "debate"). Once memory forgets them, the traces must not keep their text. Memory calls
these inside its own forgetting transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.db import connection

# Each lateral step takes the trace the step before left: the lists without the forgotten ids,
# the note dropped if it quotes one, the reflection's rejected quotes if it wrote one, then
# the plan's steps and the debate's draft and review, from every trace of the owners
# (`everywhere`) or from those quoting one of `quoting` whole.
_TRACES_FORGET_SQL = """
WITH scrubbed AS (
    SELECT m.id, m.trace AS before, debated.trace AS after
      FROM chat_message AS m
      JOIN chat_conversation AS c ON c.id = m.conversation_id
     CROSS JOIN LATERAL (
         SELECT jsonb_set(jsonb_set(jsonb_set(m.trace,
                    '{memory,memories}', jsonb_path_query_array(
                        m.trace, '$.memory.memories[*] ? (!(@.id == $memories[*]))', %(ids)s::jsonb
                    ), false),
                    '{memory,triples}', jsonb_path_query_array(
                        m.trace, '$.memory.triples[*] ? (!(@.id == $triples[*]))', %(ids)s::jsonb
                    ), false),
                    '{memory,episodes}', jsonb_path_query_array(
                        m.trace, '$.memory.episodes[*] ? (!(@.id == $episodes[*]))', %(ids)s::jsonb
                    ), false) AS trace
     ) AS listed
     CROSS JOIN LATERAL (
         SELECT CASE WHEN jsonb_path_exists(listed.trace, '$.note ? (@.memories[*] == $memories[*]
                              || @.triples[*] == $triples[*] || @.episodes[*] == $episodes[*])',
                              %(ids)s::jsonb)
                     THEN listed.trace - 'note'
                     ELSE listed.trace
                END AS trace
     ) AS noted
     CROSS JOIN LATERAL (
         SELECT CASE WHEN jsonb_path_exists(noted.trace, '$.reflection ? (
                              @.created[*] == $memories[*] || @.updated[*] == $memories[*]
                              || @.left[*] == $memories[*] || @.quarantined[*] == $memories[*])',
                              %(ids)s::jsonb)
                     THEN jsonb_set(noted.trace, '{reflection,rejected}', '[]', false)
                     ELSE noted.trace
                END AS trace
     ) AS reflected
     CROSS JOIN LATERAL (
         SELECT CASE WHEN %(everywhere)s OR EXISTS (
                         SELECT 1 FROM unnest(%(quoting)s::text[]) AS quoted(text)
                          WHERE strpos(lower((reflected.trace #> '{memory,plan,steps}')::text),
                                       lower(btrim(to_jsonb(quoted.text)::text, '"'))) > 0)
                     THEN jsonb_set(reflected.trace, '{memory,plan,steps}', '[]', false)
                     ELSE reflected.trace
                END AS trace
     ) AS planned
     CROSS JOIN LATERAL (
         SELECT CASE WHEN %(everywhere)s OR EXISTS (
                         SELECT 1 FROM unnest(%(quoting)s::text[]) AS quoted(text)
                          WHERE strpos(lower((planned.trace -> 'debate')::text),
                                       lower(btrim(to_jsonb(quoted.text)::text, '"'))) > 0)
                     THEN planned.trace #- '{debate,draft}' #- '{debate,review}'
                     ELSE planned.trace
                END AS trace
     ) AS debated
     WHERE c.owner_id = ANY(%(owners)s::bigint[])
       AND m.trace ?| array['memory', 'note', 'reflection', 'debate']
)
UPDATE chat_message AS m
   SET trace = s.after
  FROM scrubbed AS s
 WHERE s.id = m.id AND s.after <> s.before
"""

_TRACES_FORGET_ALL_MEMORIES_SQL = """
WITH scrubbed AS (
    SELECT m.id, m.trace AS before,
           jsonb_set(jsonb_set(jsonb_set(jsonb_set(jsonb_set(jsonb_set(
               m.trace, '{memory,memories}', '[]', false),
               '{memory,episodes}', '[]', false),
               '{memory,triples}', '[]', false),
               '{memory,plan,steps}', '[]', false),
               '{reflection,rejected}', '[]', false),
               '{reflection,proposed}', '[]', false)
           - 'note' #- '{debate,draft}' #- '{debate,review}' AS after
      FROM chat_message AS m
      JOIN chat_conversation AS c ON c.id = m.conversation_id
     WHERE c.owner_id = %s
       AND m.trace ?| array['memory', 'note', 'reflection', 'debate']
)
UPDATE chat_message AS m
   SET trace = s.after
  FROM scrubbed AS s
 WHERE s.id = m.id AND s.after <> s.before
"""


def message_traces_forget(
    *,
    owner_ids: Sequence[int],
    memory_ids: Sequence[int] = (),
    triple_ids: Sequence[int] = (),
    episode_ids: Sequence[int] = (),
    quoting: Sequence[str] | None = None,
) -> int:
    """Take these memories, triples and episodes out of their owners' answers' traces, with the
    notes quoting them, in one statement; how many traces changed.

    What may paraphrase them (plan steps, debate drafts and reviews) goes from every trace of
    the owners, a person's forgetting; given `quoting` (decay's), only from the traces quoting
    one of these texts whole.
    """
    ids = {"memories": list(memory_ids), "triples": list(triple_ids), "episodes": list(episode_ids)}
    with connection.cursor() as cursor:
        cursor.execute(
            _TRACES_FORGET_SQL,
            {
                "ids": json.dumps(ids),
                "owners": list(owner_ids),
                "everywhere": quoting is None,
                "quoting": list(quoting or []),
            },
        )
        return cursor.rowcount


def message_traces_forget_all_memories(*, owner_id: int) -> int:
    """Empty what one person's answers' traces quote of memory (the memories, episodes and
    triples used, the note, the memories reflection rejected or proposed) or may paraphrase
    (plan steps, debate drafts and reviews), in one statement; how many traces changed. The
    answers themselves stay."""
    with connection.cursor() as cursor:
        cursor.execute(_TRACES_FORGET_ALL_MEMORIES_SQL, [owner_id])
        return cursor.rowcount
