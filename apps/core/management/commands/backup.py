"""`manage.py backup FILE`: the database and the secret key in one file (see apps.core.backup)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from apps.core.backup import BackupError, backup_create, database_parameters


class Command(BaseCommand):
    help = (
        "Back up Thalamus's database (and the secret key, when it lives in the data dir) into "
        "one new file; safe while Thalamus runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="The backup file to create.")

    def handle(self, *args, file: Path, **options):
        key_file = settings.DATA_DIR / "secret_key"
        key_in_use = key_file.is_file() and key_file.read_text().strip() == settings.SECRET_KEY
        database = database_parameters(connections["default"].settings_dict)
        try:
            manifest = backup_create(
                path=file.resolve(),
                database=database,
                secret_key_file=key_file if key_in_use else None,
            )
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        size = file.stat().st_size / 1e6
        key = (
            "and the secret key"
            if manifest["secret_key"]
            else "(not the secret key: SECRET_KEY is set in the environment)"
        )
        self.stdout.write(
            f"Backed up the database {manifest['database']} {key} to {file} ({size:.1f} MB)."
        )
