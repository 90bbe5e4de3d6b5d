"""The admin as the curator's editor, driven in Chromium next to a user's open dashboard."""

from __future__ import annotations

import pytest

from apps.memory.models import MemoryNode

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _log_in(page, asgi_server, username, password):
    page.goto(f"{asgi_server}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def test_a_memory_typed_into_the_admin_appears_on_the_users_open_dashboard(
    chromium, asgi_server, user, django_user_model, llm_stub
):
    django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-9xx")
    users_context = chromium.new_context()
    admins_context = chromium.new_context()
    try:
        dashboard = users_context.new_page()
        _log_in(dashboard, asgi_server, "alice", "correct-horse-battery-9")
        dashboard.goto(f"{asgi_server}/dashboard/")
        dashboard.locator("#live-status.on").wait_for()

        admin = admins_context.new_page()
        _log_in(admin, asgi_server, "root", "pw-root-9xx")
        admin.goto(f"{asgi_server}/admin/memory/memorynode/add/")
        # The owner field is the admin's autocomplete widget: type a name, pick the result.
        admin.click("#id_owner + .select2 .select2-selection")
        admin.fill(".select2-search__field", "alice")
        admin.locator(".select2-results__option", has_text="alice").click()
        admin.fill("#id_description", "Alice's favourite tea is genmaicha")
        admin.click("input[name=_save]")
        admin.locator(".messagelist .success").wait_for()

        # How soon is test_dashboard.py's to measure, against a push: here only that it comes.
        dashboard.locator("#mind-stream .stream-summary", has_text="genmaicha").wait_for()
        assert MemoryNode.objects.filter(owner=user, description__contains="genmaicha").exists()

        admin.goto(f"{asgi_server}/admin/memory/memorynode/?q=genmaicha")
        assert admin.locator("#result_list tbody tr").count() == 1
        admin.goto(f"{asgi_server}/admin/core/runtimeconfig/")
        assert admin.locator("#content").count() == 1
        # The admin follows the site's theme (system: the admin's auto), and its own switch
        # saves the next one as the user's theme.
        assert admin.evaluate("document.documentElement.dataset.theme") == "auto"
        with admin.expect_response(lambda r: r.url.endswith("/accounts/settings/theme/")):
            admin.locator("#header .theme-toggle").click()
        chosen = admin.evaluate("document.documentElement.dataset.theme")
        root = django_user_model.objects.get(username="root")
        assert chosen in ("light", "dark") and root.thalamus_settings.theme == chosen
    finally:
        users_context.close()
        admins_context.close()
