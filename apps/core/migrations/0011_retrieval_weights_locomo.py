# The full-text and neighbour weights measured best on LoCoMo (bench/README.md, "Retrieval quality
# on LoCoMo"); an installation still on the old defaults moves with them, an admin's own values stay.

import django.core.validators
from django.db import migrations, models

OLD = {"weight_text": 0.25, "weight_context": 0.5}
NEW = {"weight_text": 0.6, "weight_context": 0.7}


def move_defaults(apps, schema_editor, *, before: dict, after: dict):
    RuntimeConfig = apps.get_model("core", "RuntimeConfig")
    for name, value in before.items():
        RuntimeConfig.objects.filter(**{name: value}).update(**{name: after[name]})


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0010_critic_sweep_schedule"),
    ]

    operations = [
        migrations.AlterField(
            model_name="runtimeconfig",
            name="weight_text",
            field=models.FloatField(
                default=0.6, validators=[django.core.validators.MinValueValidator(0.0)]
            ),
        ),
        migrations.AlterField(
            model_name="runtimeconfig",
            name="weight_context",
            field=models.FloatField(
                default=0.7,
                help_text="How much a memory also scores for its best neighbour (0 ranks each alone).",
                validators=[
                    django.core.validators.MinValueValidator(0.0),
                    django.core.validators.MaxValueValidator(10.0),
                ],
            ),
        ),
        migrations.RunPython(
            lambda apps, editor: move_defaults(apps, editor, before=OLD, after=NEW),
            lambda apps, editor: move_defaults(apps, editor, before=NEW, after=OLD),
        ),
    ]
