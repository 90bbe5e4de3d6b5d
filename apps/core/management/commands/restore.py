"""`manage.py restore FILE`: put a `manage.py backup` back, with Thalamus stopped."""

from __future__ import annotations

import os
from pathlib import Path

import redis
from django.conf import settings
from django.core.cache import cache
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from apps.core.backup import (
    BackupError,
    backup_restore,
    database_parameters,
    database_parameters_from_url,
)


class Command(BaseCommand):
    help = (
        "Restore a backup made by `manage.py backup` into Thalamus's database (stop `up` "
        "first). A database that already has tables is replaced only with --force."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="A file made by `manage.py backup`.")
        parser.add_argument(
            "--force",
            action="store_true",
            help="Replace a database that already has tables (everything in it is lost).",
        )
        parser.add_argument(
            "--database-url",
            help="Restore into this database (postgresql://…/NAME) instead of Thalamus's own.",
        )

    def handle(self, *args, file: Path, force: bool, database_url: str | None, **options):
        # The key in the environment wins over the data dir's, so a written one would be unused.
        key_from_environment = bool(os.environ.get("SECRET_KEY", "").strip())
        key_file = None if key_from_environment else settings.DATA_DIR / "secret_key"
        connections.close_all()
        try:
            database = (
                database_parameters_from_url(database_url)
                if database_url
                else database_parameters(connections["default"].settings_dict)
            )
            manifest = backup_restore(
                path=file, database=database, force=force, secret_key_file=key_file
            )
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        _forget_cache()
        self.stdout.write(
            f"Restored {file} (the database {manifest['database']}, backed up at "
            f"{manifest['created_at']}) into the database {database['dbname']}."
        )
        if manifest["secret_key"] and key_file is not None:
            self.stdout.write(f"The backup's secret key is now {key_file}.")
        elif manifest["secret_key"]:
            self.stdout.write(
                "The backup's secret key was not written: SECRET_KEY is set in the environment."
            )
        else:
            self.stdout.write(
                "The backup holds no secret key (SECRET_KEY was set when it was made): keep that "
                "SECRET_KEY, or everyone signs in again."
            )
        self.stdout.write("`manage.py up` applies any newer migrations when it starts.")


def _forget_cache() -> None:
    """Drop this instance's cache: runtime configuration, sessions and limits of the old data."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = list(client.scan_iter(match=cache.make_key("*"), count=1000))
    if keys:
        client.delete(*keys)
