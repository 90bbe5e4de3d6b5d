from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from thalamus_site import settings as site_settings


def test_env_int_rejects_words(monkeypatch):
    monkeypatch.setenv("THALAMUS_EMBED_DIM", "lots")
    with pytest.raises(ImproperlyConfigured, match="THALAMUS_EMBED_DIM must be a whole number"):
        site_settings.env_int("THALAMUS_EMBED_DIM", 768)


def test_env_int_rejects_out_of_range(monkeypatch):
    monkeypatch.setenv("THALAMUS_EMBED_DIM", "0")
    with pytest.raises(ImproperlyConfigured, match="between 8 and"):
        site_settings.env_int("THALAMUS_EMBED_DIM", 768, minimum=8)


def test_env_bool_rejects_maybe(monkeypatch):
    monkeypatch.setenv("DEBUG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="DEBUG must be true or false"):
        site_settings.env_bool("DEBUG", False)


def test_env_url_rejects_a_bare_host(monkeypatch):
    monkeypatch.setenv("THALAMUS_LLM_BASE_URL", "localhost:11434")
    with pytest.raises(ImproperlyConfigured, match="THALAMUS_LLM_BASE_URL must be a URL"):
        site_settings.env_url("THALAMUS_LLM_BASE_URL", "http://x", {"http", "https"})


def test_database_url_is_parsed_with_socket_host():
    db = site_settings.database_from_url("postgresql://bob:pw@/things?host=/tmp/sock&port=5433")
    assert (db["NAME"], db["USER"], db["PASSWORD"]) == ("things", "bob", "pw")
    assert (db["HOST"], db["PORT"]) == ("/tmp/sock", "5433")


def test_database_url_must_be_postgres():
    with pytest.raises(ImproperlyConfigured, match="postgresql://"):
        site_settings.database_from_url("mysql://db/x")


def test_unix_redis_url_is_spelled_for_celery():
    assert site_settings.celery_url("unix:///run/r.sock?db=0") == "redis+socket:///run/r.sock?db=0"
    assert site_settings.celery_url("redis://h:6379/0") == "redis://h:6379/0"
