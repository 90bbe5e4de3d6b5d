"""The Celery worker's heartbeat: a timestamp in the cache that /healthz reads."""

from __future__ import annotations

import time

from celery import bootsteps

HEARTBEAT_KEY = "core:worker-heartbeat"
HEARTBEAT_INTERVAL = 5.0
HEARTBEAT_STALE_AFTER = 30.0


def beat(hostname: str) -> None:
    from django.core.cache import cache

    cache.set(HEARTBEAT_KEY, {"hostname": hostname, "at": time.time()}, HEARTBEAT_STALE_AFTER * 4)


def last_heartbeat() -> dict | None:
    from django.core.cache import cache

    return cache.get(HEARTBEAT_KEY)


class HeartbeatStep(bootsteps.StartStopStep):
    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self.tref = None

    def start(self, worker):
        beat(worker.hostname)
        self.tref = worker.timer.call_repeatedly(
            HEARTBEAT_INTERVAL, beat, (worker.hostname,), priority=10
        )

    def stop(self, worker):
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None
