"""The demo's quick pace, set by `manage.py up --demo`: memory forms within a minute of chatting.

The demo model remembers first-person statements and its critic confirms them; here the beat
runs promotion and linking every `DEMO_EVERY_SECONDS` instead of every few minutes, and a
fresh install promotes a memory the critic has confirmed once. The quick schedules are beat
entries of their own, removed again when Thalamus next starts without the demo, so the normal
schedules (and an admin's edits of them) are never touched.
"""

from __future__ import annotations

from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from apps.core.models import RuntimeConfig
from apps.core.services import runtime_config_save

# The demo stub's chat model, as the picker and the status line name it.
DEMO_CHAT_MODEL = "demo"
DEMO_EVERY_SECONDS = 10
# name -> task. There is no critic sweep: the critic runs right after each reflection.
DEMO_SCHEDULES = {"Demo: promote and link memories every 10 s": "memory.promote_and_link"}
# A memory quoting the user starts at confidence 1; one "withstands" from the critic makes 2.
DEMO_PROMOTION_THRESHOLD = 2


def demo_pace_start() -> list[str]:
    """Quick beat schedules, and a reachable promotion threshold on a fresh runtime config;
    what it did, as sentences for the log."""
    with transaction.atomic():
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=DEMO_EVERY_SECONDS, period=IntervalSchedule.SECONDS
        )
        for name, task in DEMO_SCHEDULES.items():
            PeriodicTask.objects.update_or_create(
                name=name, defaults={"task": task, "interval": interval, "enabled": True}
            )
        done = [
            f"demo: memories are promoted and linked every {DEMO_EVERY_SECONDS} s "
            "(the normal schedules are unchanged)."
        ]
        if RuntimeConfig.objects.exists():
            threshold = RuntimeConfig.objects.order_by("pk").first().promotion_threshold
            done.append(
                f"demo: kept the runtime config's promotion threshold of {threshold} "
                "(it was set before)."
            )
        else:
            runtime_config_save(config=RuntimeConfig(promotion_threshold=DEMO_PROMOTION_THRESHOLD))
            done.append(
                f"demo: fresh runtime config saved with promotion threshold "
                f"{DEMO_PROMOTION_THRESHOLD}, so a memory the critic confirmed once is promoted "
                "(change it in the admin)."
            )
    return done


def demo_pace_stop() -> int:
    """Remove the quick schedules a demo left behind; how many there were."""
    deleted, _ = PeriodicTask.objects.filter(name__in=list(DEMO_SCHEDULES)).delete()
    return deleted
