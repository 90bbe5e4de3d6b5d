from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")

app = Celery("thalamus")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _install_heartbeat() -> None:
    from apps.core.heartbeat import HeartbeatStep

    app.steps["worker"].add(HeartbeatStep)


_install_heartbeat()
