"""Security headers on every response, and the THALAMUS_HTTPS switch for a deployment behind TLS
(the switch is read at start-up, so it is tried in fresh processes)."""

from __future__ import annotations

import base64
import codecs
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from apps.core.middleware import VIS_NETWORK_STYLE_HASHES

ROOT = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    db = settings.DATABASES["default"]
    # The test settings allow the ORM on the event loop; a deployment does not.
    inherited = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return {
        **inherited,
        "DATABASE_URL": (
            f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}&port={db['PORT']}"
        ),
        "REDIS_URL": settings.REDIS_URL,
        **extra,
    }


def _deploy_env(**extra: str) -> dict[str, str]:
    return _env(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="thalamus.example.org",
        **extra,
    )


def _check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.django_db
def test_every_page_carries_a_csp_without_inline_styles_and_the_other_headers(client, user):
    client.force_login(user)
    for path in ("/", "/accounts/login/", "/memory/", "/healthz"):
        response = client.get(path, follow=True)
        csp = dict(
            part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";")
        )
        assert (
            "'unsafe-inline'" not in csp["style-src"] and "'unsafe-inline'" not in csp["script-src"]
        ), path
        assert csp["frame-ancestors"] == "'none'" and csp["object-src"] == "'none'"
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"


def test_no_template_carries_an_inline_style_element():
    templates = [*(ROOT / "templates").rglob("*.html"), *(ROOT / "apps").rglob("*.html")]
    assert templates
    assert [path for path in templates if "<style" in path.read_text()] == []


def test_the_allowed_style_hashes_are_those_vis_network_injects():
    js = (ROOT / "static/vendor/vis-network/vis-network.min.js").read_text()
    injected = [""]  # the empty element, before its text is added
    for match in re.finditer(r'\bA\((["\'])(?=\.vis|div\.vis)', js):
        quote, start = match.group(1), match.end()
        end = start
        while js[end] != quote:
            end += 2 if js[end] == "\\" else 1
        injected.append(codecs.decode(js[start:end], "unicode_escape"))
    digests = [
        "sha256-" + base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
        for css in injected
    ]
    assert digests == VIS_NETWORK_STYLE_HASHES, "static/vendor changed: update the hashes"


def test_the_deploy_check_passes_with_no_warning_behind_tls():
    result = _check_deploy(_deploy_env(THALAMUS_HTTPS="true"))
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_without_the_switch_the_deploy_check_names_only_what_plain_http_lacks():
    result = _check_deploy(_deploy_env())
    assert result.returncode != 0
    warnings = sorted(set(re.findall(r"security\.W\d+", result.stderr)))
    # HSTS, the HTTPS redirect and the two secure cookies: nothing a LAN over HTTP can have.
    assert warnings == ["security.W004", "security.W008", "security.W012", "security.W016"]


_REQUESTS = """
import json
import django
django.setup()
from django.test import Client
plain = Client(HTTP_HOST="thalamus.example.org")
proxied = Client(HTTP_HOST="thalamus.example.org", HTTP_X_FORWARDED_PROTO="https")
login = proxied.get("/accounts/login/")
print(json.dumps({
    "plain": [plain.get("/accounts/login/").status_code,
              plain.get("/accounts/login/").headers.get("Location", "")],
    "healthz": plain.get("/healthz").status_code,
    "proxied": login.status_code,
    "hsts": login.headers.get("Strict-Transport-Security", ""),
    "secure_cookie": bool(login.cookies["csrftoken"]["secure"]),
}))
"""


def _responses(**env: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", _REQUESTS],
        cwd=ROOT,
        env={**_deploy_env(**env), "DJANGO_SETTINGS_MODULE": "thalamus_site.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.django_db
def test_behind_tls_plain_http_is_redirected_and_https_gets_hsts_and_secure_cookies():
    seen = _responses(THALAMUS_HTTPS="true")
    assert seen["plain"] == [301, "https://thalamus.example.org/accounts/login/"]
    assert seen["healthz"] in (200, 503), "health checks inside the network stay on plain HTTP"
    assert seen["proxied"] == 200
    assert seen["hsts"] == "max-age=31536000; includeSubDomains; preload"
    assert seen["secure_cookie"]


@pytest.mark.django_db
def test_without_the_switch_plain_http_is_served_as_on_a_lan():
    seen = _responses()
    assert seen["plain"][0] == 200
    assert seen["hsts"] == "" and not seen["secure_cookie"]
