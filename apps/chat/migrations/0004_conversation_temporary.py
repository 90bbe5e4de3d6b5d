from __future__ import annotations

from django.db import migrations, models

SCHEDULE = "Delete expired temporary chats"
TASK = "chat.delete_expired_temporary"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    if PeriodicTask.objects.filter(name=SCHEDULE).exists():
        return
    interval = IntervalSchedule.objects.filter(every=15, period="minutes").first()
    if interval is None:
        interval = IntervalSchedule.objects.create(every=15, period="minutes")
    PeriodicTask.objects.create(name=SCHEDULE, task=TASK, interval=interval)


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=SCHEDULE).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0003_message_finish_reason"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="temporary",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
