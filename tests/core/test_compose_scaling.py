"""compose.yaml runs several web replicas behind one public port, as `up --web-processes`
runs several uvicorn workers on one."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent


def _services() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]


def test_the_web_replicas_sit_behind_the_proxy_that_alone_publishes_the_port():
    services = _services()
    web, proxy = services["web"], services["proxy"]
    assert "ports" not in web and web["expose"] == ["8000"]
    assert web["deploy"]["replicas"] == "${THALAMUS_WEB_REPLICAS:-2}"
    assert proxy["ports"] == ["8000:8000"]
    assert [name for name, service in services.items() if "ports" in service] == ["proxy"]
    assert proxy["depends_on"]["web"] == {"condition": "service_healthy"}
    caddyfile = (ROOT / proxy["volumes"][0].split(":")[0]).read_text()
    assert re.search(r"dynamic a \{\s*name web\s*port 8000", caddyfile)
    assert "{$THALAMUS_TRUSTED_PROXIES:" in caddyfile
    assert proxy["environment"]["THALAMUS_TRUSTED_PROXIES"].startswith(
        "${THALAMUS_TRUSTED_PROXIES:-"
    )


def test_each_replica_runs_uvicorn_as_up_does_and_believes_only_the_proxys_headers():
    web = _services()["web"]
    command = web["command"]
    assert command[command.index("--workers") + 1] == "${THALAMUS_WEB_PROCESSES:-1}"
    assert command[command.index("--lifespan") + 1] == "on"
    assert "--proxy-headers" in command
    # The rest of the app's environment still reaches the replicas.
    assert web["environment"]["FORWARDED_ALLOW_IPS"] == "*"
    assert web["environment"]["DATABASE_URL"].startswith("postgresql://")
    assert web["environment"]["SECRET_KEY"] == "${SECRET_KEY:?set SECRET_KEY in .env}"
