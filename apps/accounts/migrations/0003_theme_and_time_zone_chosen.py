from django.conf import settings
from django.db import migrations, models


def mark_chosen_zones(apps, schema_editor):
    # A saved zone other than the server's was picked on the settings page: keep it.
    UserSettings = apps.get_model("accounts", "UserSettings")
    UserSettings.objects.exclude(time_zone=settings.TIME_ZONE).update(time_zone_chosen=True)


class Migration(migrations.Migration):
    dependencies = [("accounts", "0002_user_settings")]

    operations = [
        migrations.AddField(
            model_name="usersettings",
            name="time_zone_chosen",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="usersettings",
            name="theme",
            field=models.CharField(
                choices=[("system", "System"), ("light", "Light"), ("dark", "Dark")],
                default="system",
                max_length=6,
            ),
        ),
        migrations.RunPython(mark_chosen_zones, migrations.RunPython.noop),
    ]
