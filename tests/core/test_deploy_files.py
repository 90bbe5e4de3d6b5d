"""What the image and compose are built from: .dockerignore keeps data and secrets out of the
build context, and compose migrates and seeds once before anything else starts."""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent


def _dockerignore_rules() -> list[tuple[bool, re.Pattern]]:
    """(excludes, pattern) per line, as Docker reads .dockerignore: Go's filepath.Match plus
    `**` for any number of directories, a leading `!` re-includes, the last match wins."""
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        excludes = not line.startswith("!")
        pattern = line.lstrip("!").strip().strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        rules.append((excludes, re.compile(regex + r"\Z")))
    return rules


def _in_build_context(path: str, rules) -> bool:
    # A file is left out when it, or a directory above it, matches (Docker's
    # MatchesOrParentMatches), by the last rule that matches.
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    included = True
    for excludes, pattern in rules:
        if any(pattern.match(candidate) for candidate in candidates):
            included = not excludes
    return included


def _repository_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    present = (str(p.relative_to(ROOT)) for p in (ROOT / "var").rglob("*") if p.is_file())
    return listed + list(itertools.islice(present, 2000))


def test_the_build_context_leaves_out_data_history_environments_and_secrets():
    rules = _dockerignore_rules()
    never = [
        "var/secret_key",
        "var/postgres/base/1/1259",
        "var/run/redis.sock",
        ".venv/bin/python",
        ".git/HEAD",
        ".git/objects/pack/pack-1.pack",
        ".env",
        ".env.production",
        "deploy/tls/server.key",
        "certs/fullchain.pem",
        "somewhere/secret_key",
        "apps/core/__pycache__/views.cpython-311.pyc",
    ]
    assert [path for path in never if _in_build_context(path, rules)] == []
    context = [path for path in _repository_files() if _in_build_context(path, rules)]
    leaked = [p for p in context if p.split("/")[0] in {"var", ".venv", ".git", ".env"}]
    assert leaked == []
    assert not [p for p in context if p.endswith((".pem", ".key", "secret_key"))]


def test_the_build_context_keeps_what_the_image_runs():
    rules = _dockerignore_rules()
    needed = [
        "Dockerfile",
        "manage.py",
        "pyproject.toml",
        "README.md",
        "seed_truths.yaml",
        "apps/core/views.py",
        "thalamus_site/settings.py",
        "llm_stub/server.py",
        "templates/base.html",
        "static/css/thalamus.css",
        "static/vendor/htmx/htmx.min.js",
    ]
    assert [path for path in needed if not _in_build_context(path, rules)] == []
    assert any(_in_build_context(p, rules) for p in _repository_files() if p.startswith("prompts/"))


def _compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_compose_migrates_and_loads_the_seed_truths_once_before_the_rest_starts():
    services = _compose()["services"]
    migrate = services["migrate"]
    script = " ".join(migrate["command"])
    assert "manage.py migrate --noinput" in script
    assert "manage.py load_seed_truths" in script
    assert script.index("migrate --noinput") < script.index("load_seed_truths")
    assert migrate["restart"] == "no"
    assert "migrate" not in migrate["depends_on"]
    for name in ("web", "worker", "worker-llm", "beat"):
        depends = services[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}, name
        assert depends["db"] == {"condition": "service_healthy"}, name
    assert "migrate" not in " ".join(services["web"]["command"])


def test_compose_pulls_both_models_and_passes_the_deployment_switches():
    compose = _compose()
    app = compose["x-app"]["environment"]
    pull = " ".join(compose["services"]["ollama-pull"]["command"])
    assert f"ollama pull {app['THALAMUS_CHAT_MODEL']}" in pull
    assert f"ollama pull {app['THALAMUS_EMBED_MODEL']}" in pull
    for name in ("THALAMUS_HTTPS", "THALAMUS_HEALTH_TOKEN", "FORWARDED_ALLOW_IPS"):
        assert name in app
    web = compose["services"]["web"]["command"]
    assert web[web.index("--ws-max-size") + 1] == "${THALAMUS_WS_MAX_BYTES:-4194304}"
    assert "--proxy-headers" in web
