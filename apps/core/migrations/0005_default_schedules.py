from __future__ import annotations

from django.db import migrations

# name -> (task, every, period). Created once; an admin's later edits are never overwritten.
DEFAULT_SCHEDULES = {
    "Promote and link memories": ("memory.promote_and_link", 5, "minutes"),
    "Forget stale memories": ("memory.decay", 1, "hours"),
    "Summarise idle conversations into episodes": ("cognition.episodes_sweep", 5, "minutes"),
}


def create_schedules(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    for name, (task, every, period) in DEFAULT_SCHEDULES.items():
        if PeriodicTask.objects.filter(name=name).exists():
            continue
        interval = IntervalSchedule.objects.filter(every=every, period=period).first()
        if interval is None:
            interval = IntervalSchedule.objects.create(every=every, period=period)
        PeriodicTask.objects.create(name=name, task=task, interval=interval)


def remove_schedules(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name__in=list(DEFAULT_SCHEDULES)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0004_prompt_override"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create_schedules, remove_schedules)]
