from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("core", "0017_short_term_window_20")]

    operations = [
        migrations.AddField(
            model_name="runtimeconfig",
            name="allowed_chat_models",
            field=models.TextField(
                blank=True,
                help_text="The models a user may pick for a conversation, one a line; each must "
                "also be listed by the chat's server. Blank: every chat model it lists (never an "
                "embedding model). The chat model above is always offered.",
            ),
        ),
    ]
