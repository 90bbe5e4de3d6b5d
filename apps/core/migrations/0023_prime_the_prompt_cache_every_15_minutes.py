"""The answers' shared start holds today's date (apps/cognition/system_prompt.py), so a web
process's priming at start lasts until midnight; beat sends it again every 15 minutes
(cognition.prime_prompt_cache), which asks the server only when the start changed or was not
sent for PRIME_EVERY_SECONDS."""

from django.db import migrations

SCHEDULE = "Prime the chat server's prompt cache"
TASK = "cognition.prime_prompt_cache"


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
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=SCHEDULE).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0022_quiet_seconds_help_names_titles"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
