from __future__ import annotations

from functools import partial

from celery import current_app
from django.db import transaction

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


def task_send_on_commit(name: str, *args) -> None:
    """Queue the Celery task registered as `name` once the transaction commits.

    For work an app higher up owns (a finished reply starts cognition's reflection, the memory
    browser asks cognition's critic): the task is named, not imported, so imports keep flowing
    down (the import-linter contracts in pyproject.toml).
    """
    transaction.on_commit(lambda: current_app.send_task(name, args=args))


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
