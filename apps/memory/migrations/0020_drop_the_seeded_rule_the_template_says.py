"""The seeded rule "When a memory contradicts what the user says now, trust the user and say
what changed" said again what the answer template says ("if it conflicts with what the user
says now, trust the user and say so briefly"), and the memory search put it in the notes of
messages that had nothing to do with it: on a new user's first turn it was a third of the
note. seed_truths.yaml no longer has it; this removes the row an installation was seeded with,
where nobody has changed its words."""

from django.db import migrations

RULE = "When a memory contradicts what the user says now, trust the user and say what changed."


def drop(apps, schema_editor):
    MemoryNode = apps.get_model("memory", "MemoryNode")
    MemoryNode.objects.filter(owner=None, fact_key="rule-trust-the-user", description=RULE).delete()


class Migration(migrations.Migration):
    dependencies = [("memory", "0019_privacy_fact_says_admins_see")]

    operations = [migrations.RunPython(drop, migrations.RunPython.noop)]
