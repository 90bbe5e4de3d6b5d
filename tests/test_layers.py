"""The house's layers hold: imports flow down, and views reach the database only through
selectors and services."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VIEWS = sorted((ROOT / "apps").glob("*/views.py"))

# Model methods and manager or queryset calls that write; a view calls a service instead.
WRITES = {
    "save",
    "delete",
    "create",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
}
WRITES |= {f"a{name}" for name in WRITES}
QUERYSET_STARTS = {"objects", "filter", "exclude", "all"}


def _starts_from_a_queryset(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute | ast.Call):
        if isinstance(node, ast.Attribute) and node.attr in QUERYSET_STARTS:
            return True
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return False


def database_use_in(source: str) -> list[str]:
    """Each place that reaches the ORM directly: a manager (`Model.objects`), a write method,
    an `update` of a queryset, or raw SQL."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            found.append(f"line {node.lineno}: .objects")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            writes = name in WRITES or (
                name in {"update", "aupdate"} and _starts_from_a_queryset(node.func.value)
            )
            if writes or name in {"raw", "cursor"}:
                found.append(f"line {node.lineno}: .{name}()")
    return found


def test_the_import_contracts_in_pyproject_hold():
    lint_imports = Path(sys.executable).parent / "lint-imports"

    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_module_of_the_chat_app_has_its_layer():
    """Chat sits in two layers (its pages and socket above cognition, its conversations below
    memory), so the contract names its modules one by one: a new one must be placed too."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    named = {module.strip() for layer in layers for module in re.split(r"[|:]", layer)}
    chat = ROOT / "apps" / "chat"
    modules = {
        f"apps.chat.{path.stem}"
        for path in chat.iterdir()
        if path.suffix == ".py" or (path / "__init__.py").exists()
    }

    unplaced = modules - named - {"apps.chat.__init__", "apps.chat.apps", "apps.chat.migrations"}

    assert unplaced == set()


def test_no_view_queries_or_writes_the_database_itself():
    assert VIEWS, "no views found"
    offences = {
        str(path.relative_to(ROOT)): database_use_in(path.read_text(encoding="utf-8"))
        for path in VIEWS
    }

    assert {path: found for path, found in offences.items() if found} == {}


def test_the_view_check_sees_a_write_a_manager_and_raw_sql():
    source = (
        "def view(request, form):\n"
        "    form.save()\n"
        "    Note.objects.filter(owner=request.user).update(seen=True)\n"
        "    notes = request.user.notes.all()\n"
        "    notes.filter(pinned=True).delete()\n"
        "    connection.cursor()\n"
        "    context = {}\n"
        "    context.update(a=1)\n"
    )

    assert sorted(database_use_in(source)) == [
        "line 2: .save()",
        "line 3: .objects",
        "line 3: .update()",
        "line 5: .delete()",
        "line 6: .cursor()",
    ]


# Modules that open HTTP connections themselves; only the gateway may, and `up`, which asks its
# own web server for /healthz while it starts (never an LLM).
HTTP_CLIENTS = {"openai", "httpx", "requests", "aiohttp", "urllib.request", "http.client"}
OWN_HTTP = {"apps/core/management/commands/up.py": {"urllib.request"}}


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_no_module_but_the_gateway_imports_an_http_client():
    offenders = {}
    for path in sorted((ROOT / "apps").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("apps/core/llm/"):
            continue
        clients = {
            module
            for module in _imported_modules(path)
            if module in HTTP_CLIENTS or module.split(".")[0] in {"openai", "httpx", "aiohttp"}
        } - OWN_HTTP.get(relative, set())
        if clients:
            offenders[relative] = sorted(clients)
    assert offenders == {}, "talk to the LLM through apps.core.llm.gateway"
    # The check sees what it must: the gateway's own SDK module is found by it.
    assert "openai" in _imported_modules(ROOT / "apps/core/llm/clients.py")
