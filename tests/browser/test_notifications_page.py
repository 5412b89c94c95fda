"""The Notifications page (issue 27): channels, preferences and the delivery log, in both
languages and both themes."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hal.actions.base import Actor
from tests.browser.conftest import login, screenshot
from tests.notifications.conftest import smtp_sink, verified_email  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_notifications_page_in_both_languages(live_asgi, page_factory, operator, smtp_sink):  # noqa: F811
    from hal.actions.incidents import check_open_incident
    from notifications import worker

    actor = Actor(user=operator, via="api", label=operator.get_username())
    verified_email(actor, smtp_sink)
    incident = check_open_incident(actor=actor, severity="sev2", title="db-1 disk full")
    assert worker.deliver_due("browser-test") == 1

    page = page_factory()
    login(page, live_asgi.url, operator)
    page.goto(live_asgi.url + "/notifications/")
    expect(page.locator("h1")).to_have_text("Notifications")
    expect(page.locator('#menu a[href="/notifications/"]')).to_have_text("Notifications")
    row = page.locator("#notify-channels tbody tr").first
    expect(row).to_contain_text("mail@example.test")
    expect(row).to_contain_text("verified")
    delivery = page.locator("#notify-deliveries tbody tr").first
    expect(delivery).to_have_attribute("data-status", "sent")
    expect(delivery.locator("a")).to_have_attribute("href", f"/incidents/{incident.pk}/")

    # The form adds a channel through the action; it stays unverified until its code is in.
    page.select_option("#notify-add-form select[name=kind]", "email")
    page.fill("#notify-add-form input[name=name]", "pager")
    page.fill("#notify-add-form input[name=address]", "pager@example.test")
    page.click("#notify-add-form button[type=submit]")
    expect(page.locator("#notify-notice")).to_be_visible()
    added = page.locator("#notify-channels tbody tr", has_text="pager@example.test")
    expect(added).to_contain_text("not verified")
    expect(added.locator(".verify-form input[name=code]")).to_be_visible()
    page.select_option("#theme-select", "light")
    screenshot(page, "notifications-en-light")
    page.select_option("#theme-select", "dark")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    screenshot(page, "notifications-en-dark")

    with page.expect_navigation():
        page.select_option("#lang-select", "ko")
    expect(page.locator("html")).to_have_attribute("lang", "ko")
    expect(page.locator("h1")).to_have_text("알림")
    expect(page.locator('#menu a[href="/notifications/"]')).to_have_text("알림")
    expect(page.locator("#notify-deliveries tbody tr").first).to_contain_text("보냄")
    expect(page.locator("#notify-prefs-form legend")).to_have_text("알려 줄 때")
    screenshot(page, "notifications-ko-dark")
    page.select_option("#theme-select", "light")
    screenshot(page, "notifications-ko-light")
