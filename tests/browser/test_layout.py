"""Phone and desktop layouts (#28 items 8 and 11), measured in Chromium at 1400 and 390 px, in
light and dark: the Mind page scrolls to its graph, the memory filters fold on a phone, the API
key table fits, the demo notice can be dismissed for good, the runtime configuration folds."""

from __future__ import annotations

import pytest

from apps.accounts.services import api_key_create
from apps.core.models import RuntimeConfig
from apps.memory import graph_services, services
from tests.conftest import serve_asgi

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}
SCHEMES = ("light", "dark")


def _log_in(page, server, username="alice", password="correct-horse-battery-9"):
    page.goto(f"{server}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    # Enter, not a click: the demo notice's own button comes first on the page.
    page.press("#id_password", "Enter")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_on_a_phone_the_mind_page_scrolls_to_a_graph_of_real_size(
    page, asgi_server, log_in, user, scheme
):
    services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    page.emulate_media(color_scheme=scheme)
    page.set_viewport_size(PHONE)
    log_in("alice")
    page.goto(f"{asgi_server}/dashboard/")
    canvas = page.locator("#graph canvas")
    canvas.wait_for()

    assert page.evaluate("document.scrollingElement.scrollHeight") > PHONE["height"]
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    assert box["width"] >= PHONE["width"] - 60 and box["height"] >= 0.5 * PHONE["height"]
    assert 0 <= box["y"] < PHONE["height"], "scrolled to, the graph is on the screen"
    assert page.evaluate("window.scrollY") > 0

    page.set_viewport_size(WIDE)
    page.goto(f"{asgi_server}/dashboard/")
    canvas.wait_for()
    box = canvas.bounding_box()
    assert box["height"] >= 400 and box["y"] + box["height"] <= WIDE["height"]
    assert page.evaluate("document.scrollingElement.scrollHeight") <= WIDE["height"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_memory_filters_fold_on_a_phone_and_stay_open_on_a_wide_screen(
    page, asgi_server, log_in, user, scheme
):
    services.memory_node_create(
        owner=user, description="Alice keeps bees", embed=False, source="admin"
    )
    page.emulate_media(color_scheme=scheme)
    log_in("alice")

    page.set_viewport_size(PHONE)
    page.goto(f"{asgi_server}/memory/")
    fold = page.locator("#memory-filters-fold")
    assert fold.evaluate("e => e.open") is False
    assert fold.bounding_box()["height"] < 60
    assert not page.locator("#id_q").is_visible()
    first_memory = page.locator(".memory-table tbody tr, #memory-list li").first
    assert first_memory.bounding_box()["y"] < PHONE["height"], "a memory on the first screen"
    page.click("#memory-filters-fold > summary")
    assert page.locator("#id_q").is_visible()

    page.set_viewport_size(WIDE)
    page.goto(f"{asgi_server}/memory/")
    assert fold.evaluate("e => e.open") is True
    assert page.locator("#memory-filters-fold > summary").is_hidden()
    assert page.locator("#id_q").is_visible()
    assert fold.bounding_box()["height"] > 40


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_api_key_table_fits_a_phone_with_its_revoke_button(
    page, asgi_server, log_in, user, scheme
):
    for name in ("laptop", "a rather long name for the home server"):
        api_key_create(user=user, name=name)
    page.emulate_media(color_scheme=scheme)
    log_in("alice")

    for viewport in (PHONE, WIDE):
        page.set_viewport_size(viewport)
        page.goto(f"{asgi_server}/accounts/settings/#settings-api-keys")
        revokes = page.locator("#api-keys button", has_text="Revoke")
        assert revokes.count() == 2
        for i in range(2):
            # Where it is drawn, before anything (the table's own scroller) is scrolled.
            left, right = revokes.nth(i).evaluate(
                "e => [e.getBoundingClientRect().left, e.getBoundingClientRect().right]"
            )
            assert left >= 0 and right <= viewport["width"], viewport
        assert page.evaluate("document.scrollingElement.scrollWidth") <= viewport["width"]
    table = page.locator("#api-keys")
    assert table.locator("thead").is_visible(), "a table with headings on a wide screen"

    page.set_viewport_size(PHONE)
    assert table.locator("thead").is_hidden(), "cards on a phone"


@pytest.fixture(scope="module")
def demo_server(django_db_setup):
    with serve_asgi(THALAMUS_DEMO="1") as url:
        yield url


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_demo_notice_is_dismissed_for_good_and_the_phone_header_is_compact(
    page, demo_server, user, scheme
):
    page.emulate_media(color_scheme=scheme)
    page.set_viewport_size(PHONE)
    _log_in(page, demo_server)
    page.goto(f"{demo_server}/memory/")
    banner = page.locator("#demo-banner")
    header = page.locator("header.topbar")
    assert banner.count() == 1
    assert header.bounding_box()["height"] + banner.bounding_box()["height"] < 0.2 * PHONE["height"]

    # The form posts and comes back to this very address, where a wait for the URL returns
    # at once: wait for the page it loads.
    with page.expect_navigation(url=f"{demo_server}/memory/"):
        page.click("#demo-banner button")
    assert banner.count() == 0
    page.reload()
    assert banner.count() == 0, "still gone after a reload"
    page.goto(f"{demo_server}/dashboard/")
    assert banner.count() == 0, "and on the other pages"
    assert header.bounding_box()["height"] <= 48


def test_the_runtime_configuration_opens_in_five_folded_sections(
    page, asgi_server, django_user_model
):
    django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-9xx")
    config = RuntimeConfig.objects.create()
    _log_in(page, asgi_server, "root", "pw-root-9xx")
    for scheme in SCHEMES:
        page.emulate_media(color_scheme=scheme)
        for viewport in (WIDE, PHONE):
            page.set_viewport_size(viewport)
            page.goto(f"{asgi_server}/admin/core/runtimeconfig/{config.pk}/change/")
            sections = page.locator("fieldset.collapse")
            assert sections.count() == 5
            assert page.locator("fieldset.collapse details[open]").count() == 0
            folded = page.evaluate("document.scrollingElement.scrollHeight")
            for i in range(5):
                sections.nth(i).locator("summary").click()
            unfolded = page.evaluate("document.scrollingElement.scrollHeight")
            assert page.locator("#id_chat_model").is_visible()
            assert unfolded > 3 * folded, (viewport, folded, unfolded)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_memory_and_facts_tables_fit_a_phone_as_cards(page, asgi_server, log_in, user, scheme):
    services.memory_node_create(
        owner=user,
        description="Alice keeps bees on the roof of her building",
        embed=False,
        source="admin",
    )
    graph_services.triple_upsert(
        owner=user, subject="user", predicate="lives_in", object="Turin", confidence=0.8
    )
    page.emulate_media(color_scheme=scheme)
    log_in("alice")

    for path, table in (("/memory/", ".memory-table"), ("/memory/knowledge", "#triples")):
        page.set_viewport_size(WIDE)
        page.goto(f"{asgi_server}{path}")
        assert page.locator(f"{table} thead").is_visible()
        assert page.locator(f"{table} tbody tr").count() == 1

        page.set_viewport_size(PHONE)
        assert page.locator(f"{table} thead").is_hidden()
        right = page.locator(f"{table} tbody tr").evaluate(
            "row => Math.max(...[...row.cells].map(c => c.getBoundingClientRect().right))"
        )
        assert right <= PHONE["width"], path
        assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"], path


def test_a_runtime_setting_refused_shows_its_section_unfolded(
    page, asgi_server, django_user_model, llm_stub
):
    django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-9xx")
    config = RuntimeConfig.objects.create(llm_base_url=llm_stub.url)
    _log_in(page, asgi_server, "root", "pw-root-9xx")
    page.set_viewport_size(PHONE)
    url = f"{asgi_server}/admin/core/runtimeconfig/{config.pk}/change/"
    page.goto(url)
    page.locator("fieldset.collapse summary", has_text="Memory").click()
    page.fill("#id_duplicate_similarity", "0.1")
    page.click("input[name=_save]")
    page.locator(".errornote").wait_for()

    # Django draws a section holding an error unfolded (no <details>); the rest stay folded.
    assert page.locator("fieldset.collapse").count() == 5
    assert page.locator("fieldset.collapse details:not([open])").count() == 4
    error = page.locator(".field-duplicate_similarity .errorlist")
    assert error.is_visible() and error.bounding_box()["height"] > 0


@pytest.mark.parametrize("scheme", SCHEMES)
def test_on_a_phone_the_header_shows_every_page_link_the_theme_switch_and_log_out(
    page, asgi_server, log_in, user, scheme
):
    page.emulate_media(color_scheme=scheme)
    page.set_viewport_size(PHONE)
    log_in("alice")
    page.goto(f"{asgi_server}/memory/")
    controls = page.locator(".topbar nav a, #theme-choice, .topbar .user-menu .btn-ghost")
    assert controls.count() == 6
    for n in range(controls.count()):
        box = controls.nth(n).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], controls.nth(n)
        assert box["width"] >= 24 and box["y"] + box["height"] <= 48
    # No link is clipped by the nav or hidden under the controls beside it.
    nav = "(() => { const n = document.querySelector('.topbar nav');"
    assert page.evaluate(nav + " return n.scrollWidth <= n.clientWidth; })()")
    boxes = [controls.nth(n).bounding_box() for n in range(controls.count())]
    for left, right in zip(boxes, boxes[1:], strict=False):
        assert left["x"] + left["width"] <= right["x"] + 0.5, (left, right)
