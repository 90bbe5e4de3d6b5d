from __future__ import annotations

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")

app = Celery("thalamus")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _close_old_connections(sender=None, **_kwargs) -> None:
    """What Django does around a request, around a task: drop a connection that is broken or
    older than CONN_MAX_AGE, and have the next query ping a kept one first (settings.py,
    CELERY_DB_REUSE_MAX). Not around a task run eagerly, inside its caller's transaction."""
    from django.db import close_old_connections

    if not getattr(getattr(sender, "request", None), "is_eager", False):
        close_old_connections()


task_prerun.connect(_close_old_connections, weak=False)
task_postrun.connect(_close_old_connections, weak=False)


def _install_heartbeat() -> None:
    from apps.core.heartbeat import HeartbeatStep

    app.steps["worker"].add(HeartbeatStep)


_install_heartbeat()
