from __future__ import annotations

from django.db import migrations

NAME = "Criticise volatile memories no turn reviewed"
TASK = "cognition.criticise_unreviewed"
EVERY, PERIOD = 10, "minutes"


# Created once, as 0005 creates the others; an admin's later edits are never overwritten.
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
        ("core", "0009_model_limits"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create_schedule, remove_schedule)]
