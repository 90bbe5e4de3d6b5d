"""Importing a ChatGPT export in Chromium: the progress bar moves to done without a reload."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apps.imports.models import Import
from apps.memory.models import MemoryNode
from tests.cognition.conftest import reflection

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(os.environ.get("THALAMUS_SCREENSHOTS", "/tmp/thalamus-shots"))
EXPORT = Path(__file__).parent.parent / "imports" / "fixtures" / "chatgpt_conversations.json"


def test_an_uploaded_export_shows_its_progress_live_until_done(
    page, asgi_server, log_in, user, llm_stub, config, celery_worker
):
    config(critic_enabled=False)
    # Slow reflections, so the page is open while the import learns.
    llm_stub.script(
        {**reflection("I live in Lisbon"), "ttft": 1.5},
        {**reflection("I'm vegetarian"), "ttft": 1.5},
    )
    log_in("alice")
    page.goto(f"{asgi_server}/memory/")
    page.click("#conversation-import-link")
    page.set_input_files("#conversation-import-form input[type=file]", str(EXPORT))
    page.click("#conversation-import-form button[type=submit]")
    page.wait_for_selector("text=You can leave this page")
    row = page.locator(".import-row")
    assert row.locator(".badge").inner_text() != "Done"
    url = page.url

    # The import learns in the worker, background work a loaded machine slows.
    row.locator(".badge", has_text="Done").wait_for(timeout=60_000)

    assert page.url == url
    assert row.locator("progress").get_attribute("value") == "100"
    assert "learnt from 2 of 2 replies" in row.inner_text()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.screenshot(path=str(SHOTS / f"import-done-{scheme}.png"), full_page=True)
    assert Import.objects.get(owner=user).status == "done"
    assert set(MemoryNode.objects.filter(owner=user).values_list("source", flat=True)) == {
        "imported"
    }
    page.goto(f"{asgi_server}/")
    page.locator("text=Sourdough starter help").first.wait_for()
