from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from functools import partial

from celery import current_app
from django.db import connection, transaction

from apps.core.models import Event, RuntimeConfig
from apps.core.selectors import forget_runtime_config, remember_runtime_config


@transaction.atomic
def runtime_config_save(*, config: RuntimeConfig) -> RuntimeConfig:
    config.full_clean()
    if config.pk is None:
        existing = RuntimeConfig.objects.select_for_update().order_by("pk").first()
        if existing is not None:
            config.pk = existing.pk
    config.save()
    # Now, so this transaction reads its own edit; on commit the saved row goes into the cache,
    # over an old row another process may have cached in between (readers only fill an empty
    # slot, so one that read the old row a moment earlier cannot put it back afterwards).
    forget_runtime_config()
    transaction.on_commit(partial(remember_runtime_config, config))
    return config


def task_send_on_commit(name: str, *args, countdown: float | None = None) -> None:
    """Queue the Celery task registered as `name` once the transaction commits, to run
    `countdown` seconds later if given.

    For work an app higher up owns (a finished reply starts cognition's reflection, the memory
    browser asks cognition's critic): the task is named, not imported, so imports keep flowing
    down (the import-linter contracts in pyproject.toml).
    """
    transaction.on_commit(lambda: current_app.send_task(name, args=args, countdown=countdown))


def mind_group(owner_id: int | None) -> str:
    """The channel group of one user's mind (or of global knowledge) for live dashboards."""
    return f"mind-{owner_id}" if owner_id is not None else "mind-global"


def event_record(*, kind: str, summary: str, owner=None, payload: dict | None = None) -> Event:
    """Log a step of the mind and, once committed, tell every open dashboard of its owner."""
    return events_record(
        [Event(kind=kind, summary=summary[:500], owner=owner, payload=payload or {})]
    )[0]


def events_record(events: list[Event]) -> list[Event]:
    """Log many steps in one INSERT (set-based work such as decay touches many owners)."""
    for event in events:
        event.summary = event.summary[:500]
    created = Event.objects.bulk_create(events)

    async def announce_all() -> None:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        for event in created:
            await layer.group_send(
                mind_group(event.owner_id),
                {"type": "mind.event", "event_id": event.pk, "kind": event.kind},
            )

    def announce() -> None:
        from asgiref.sync import async_to_sync

        async_to_sync(announce_all)()

    transaction.on_commit(announce)
    return created


# The events that name one of the nodes or episodes (critique and edit events quote a memory's
# text, an episode's event its summary), the reflections that wrote one of the nodes (their
# rejected quotes are often the user's own words, a little off), and the debates that may
# paraphrase them: every debate with a review (its violations and critique quote the user's
# rules), or only those quoting one of `quoting` whole.
_EVENTS_MENTIONING_SQL = """
DELETE FROM core_event
 WHERE (owner_id = ANY(%(owners)s::bigint[]) OR (owner_id IS NULL AND %(global)s))
   AND (jsonb_path_exists(payload, '$ ? (@.node_id == $nodes[*] || @.episode_id == $episodes[*])',
                          %(ids)s::jsonb)
        OR kind = 'perception' AND jsonb_path_exists(payload, '$ ? (@.created[*] == $nodes[*]
               || @.updated[*] == $nodes[*] || @.left[*] == $nodes[*]
               || @.quarantined[*] == $nodes[*])', %(ids)s::jsonb)
        OR kind = 'debate'
           AND jsonb_exists(payload, 'critique')
           AND (%(everywhere)s OR EXISTS (
                   SELECT 1 FROM unnest(%(quoting)s::text[]) AS quoted(text)
                    WHERE strpos(lower(payload::text),
                                 lower(btrim(to_jsonb(quoted.text)::text, '"'))) > 0
               )))
"""


def events_delete_mentioning(
    *,
    node_ids: Sequence[int],
    owner_ids: Collection[int | None],
    episode_ids: Sequence[int] = (),
    quoting: Sequence[str] | None = None,
) -> int:
    """Delete the events of these owners (None: global knowledge's) that name one of these
    memory nodes or episodes, and their debates (all, or with `quoting` those quoting one of
    these texts whole), in one statement; how many went. Forgetting a memory forgets them too."""
    with connection.cursor() as cursor:
        cursor.execute(
            _EVENTS_MENTIONING_SQL,
            {
                "owners": [owner_id for owner_id in owner_ids if owner_id is not None],
                "global": None in owner_ids,
                "ids": json.dumps({"nodes": list(node_ids), "episodes": list(episode_ids)}),
                "everywhere": quoting is None,
                "quoting": list(quoting or []),
            },
        )
        return cursor.rowcount


def events_delete_of_owner(*, owner_id: int) -> int:
    """Delete every event of one person's mind; how many went."""
    return Event.objects.filter(owner_id=owner_id).delete()[0]
