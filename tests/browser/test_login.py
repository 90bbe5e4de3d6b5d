from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_user_logs_in_sees_home_and_logs_out(page, asgi_server, user):
    requested_hosts = set()
    page.on("request", lambda request: requested_hosts.add(request.url.split("/")[2]))
    errors = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))

    page.goto(f"{asgi_server}/")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", "alice")
    page.fill("#id_password", "correct-horse-battery-9")
    page.click("button[type=submit]")
    page.wait_for_selector("header.topbar")
    assert page.locator(".username").inner_text() == "alice"
    page.wait_for_load_state("domcontentloaded")  # deferred scripts have run by then
    assert page.evaluate("typeof window.htmx") == "object"

    page.click("text=Log out")
    page.wait_for_selector("#id_username")
    assert "/accounts/login/" in page.url
    assert requested_hosts == {asgi_server.split("/")[2]}
    assert errors == []
