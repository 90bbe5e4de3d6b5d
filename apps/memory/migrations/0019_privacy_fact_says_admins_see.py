"""The shared fact about privacy says who can see a user's memories (#40): other users never,
admins yes. seed_truths.yaml is loaded into an empty memory only, so an installation made before
keeps the old sentence, which every answer may quote; this rewrites that row where it still has
its old words, and lets the worker embed it again (memory.embed_pending)."""

from django.db import migrations

OLD = (
    "Thalamus remembers what users tell it across conversations, keeps each user's memories "
    "private to that user, and forgets unconfirmed details after a while."
)
NEW = (
    "Thalamus remembers what users tell it across conversations and forgets unconfirmed details "
    "after a while. No user ever sees another user's memories; the admins of a Thalamus can see "
    "them, because they curate memory, and each user is shown when an admin looked."
)


def _rewrite(old: str, new: str):
    def rewrite(apps, schema_editor):
        MemoryNode = apps.get_model("memory", "MemoryNode")
        MemoryNode.objects.filter(owner=None, description=old).update(
            description=new, embedding=None, embedding_status="pending"
        )

    return rewrite


class Migration(migrations.Migration):
    dependencies = [("memory", "0018_state_labels_in_plain_words")]

    operations = [migrations.RunPython(_rewrite(OLD, NEW), _rewrite(NEW, OLD))]
