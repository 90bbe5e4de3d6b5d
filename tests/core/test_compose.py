"""compose.yaml pulls into Ollama the two models its app services ask Ollama for, and gives its
PostgreSQL the recall's cache."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent


def test_compose_pulls_the_chat_and_the_embedding_model_the_app_services_use():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    app = compose["x-app"]["environment"]
    pull = compose["services"]["ollama-pull"]

    assert app["THALAMUS_LLM_BASE_URL"] == "${THALAMUS_LLM_BASE_URL:-http://ollama:11434/v1}"
    assert pull["environment"]["OLLAMA_HOST"] == "http://ollama:11434"
    script = " ".join(pull["command"])
    for model in ("THALAMUS_CHAT_MODEL", "THALAMUS_EMBED_MODEL"):
        # The same expression, so a model chosen in .env is the one pulled.
        assert f"ollama pull {app[model]}" in script
    assert pull["depends_on"]["ollama"]["condition"] == "service_healthy"


def test_compose_postgresql_has_the_cache_and_prewarm_the_embedded_one_has():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    command = compose["services"]["db"]["command"]

    assert command[0] == "postgres"
    settings = dict(option.split("=", 1) for option in command[2::2])
    assert command[1::2] == ["-c"] * len(settings)
    assert settings == {
        "shared_buffers": "${THALAMUS_PG_SHARED_BUFFERS_MB:-1024}MB",
        "shared_preload_libraries": "pg_prewarm",
    }
