"""The admin's "LLM metrics" page in Chromium, light and dark."""

from __future__ import annotations

import uuid

import pytest

from apps.core.metrics import record_llm_call

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_staff_member_finds_the_llm_metrics_from_the_admin_index_in_light_and_dark(
    page, asgi_server, django_user_model
):
    django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-9xx")
    model = f"browser-{uuid.uuid4().hex[:8]}"
    # Counted here, shown by the web server: another process reads the same directory.
    for _ in range(4):
        record_llm_call(
            role="reflection",
            model=model,
            prompt_tokens=1200,
            completion_tokens=300,
            ttft_s=0.8,
            latency_s=25.0,
            error=None,
        )

    page.goto(f"{asgi_server}/accounts/login/?next=/admin/")
    page.fill("#id_username", "root")
    page.fill("#id_password", "pw-root-9xx")
    page.click("button[type=submit]")
    page.click("#monitoring-module a:text('LLM metrics')")

    row = page.locator("#llm-metrics tbody tr", has_text=model)
    assert row.locator("th").inner_text() == "reflection"
    # model, requests, errors, tokens in, out, TTFT mean, p95 ≈, latency mean, p95 ≈
    assert row.locator("td").all_inner_texts()[1:] == [
        "4",
        "0",
        "4,800",
        "1,200",
        "800 ms",
        "975 ms",  # 0.5 + 0.5 × 0.95 in the (0.5 s, 1 s] bucket
        "25.00 s",
        "29.50 s",  # 20 + 10 × 0.95 in (20 s, 30 s]
    ]

    backgrounds = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        colours = page.evaluate(
            """() => {
                const style = (selector) => getComputedStyle(document.querySelector(selector));
                return {
                    page: style("body").backgroundColor,
                    text: style("#llm-metrics tbody td.number").color,
                };
            }"""
        )
        assert colours["text"] != colours["page"]
        backgrounds[scheme] = colours["page"]
    assert backgrounds["light"] != backgrounds["dark"]
