from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key for a user and print it; the key is shown only this once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="Command line", help="What the key is for.")

    def handle(self, *args, username: str, name: str, **options):
        User = get_user_model()
        user = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f'No user named "{username}".')
        key, secret = api_key_create(user=user, name=name)
        self.stdout.write(secret)
        self.stderr.write(f'Key "{key.name}" created for {username}; it will not be shown again.')
