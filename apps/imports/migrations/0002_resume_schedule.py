from __future__ import annotations

from django.db import migrations

NAME = "Resume imports whose worker stopped"
TASK = "imports.resume_stalled"
EVERY, PERIOD = 5, "minutes"


# Created once, as core's 0005 creates the others; an admin's later edits are never overwritten.
def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    if PeriodicTask.objects.filter(name=NAME).exists():
        return
    interval = IntervalSchedule.objects.filter(every=EVERY, period=PERIOD).first()
    if interval is None:
        interval = IntervalSchedule.objects.create(every=EVERY, period=PERIOD)
    PeriodicTask.objects.create(name=NAME, task=TASK, interval=interval)


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("imports", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create_schedule, remove_schedule)]
