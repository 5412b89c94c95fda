"""Browser smoke test: log in and see the console layout with room for the AI panel."""

import pytest

from tests.browser.conftest import login, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def _box(page, selector):
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not visible"
    return box


def _overlaps(a, b) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def test_login_and_layout(live_asgi, page_factory, operator):
    page = page_factory()
    page.goto(live_asgi.url + "/audit/")
    assert "/login/" in page.url
    login(page, live_asgi.url, operator)
    assert page.locator("#topbar").is_visible()
    assert page.locator("#menu a", has_text="Audit log").is_visible()
    menu, main, panel = _box(page, "#menu"), _box(page, "#main"), _box(page, "#ai-panel")
    assert panel["x"] >= main["x"] + main["width"] - 1  # the panel is on the right
    assert not _overlaps(panel, menu)
    assert page.locator("#audit-table").is_visible() or page.locator("h1").is_visible()
    screenshot(page, "layout-1440")


def test_wrong_password_shows_an_error(live_asgi, page_factory, operator):
    page = page_factory()
    page.goto(live_asgi.url + "/login/")
    page.fill("input[name=username]", operator.username)
    page.fill("input[name=password]", "wrong-" + operator.raw_password)
    page.click("button[type=submit]")
    assert page.locator("[role=alert]").get_attribute("data-code") == "invalid_credentials"
