"""The archive of past conversations and the search, as an operator uses them: "New
conversation" in the panel, then the archive page, a search, the message in place (Markdown
rendered), Continue, delete with confirmation and undo."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import connect_model
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_archive_list_search_view_and_delete(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory(viewport=(1440, 900))
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    page.goto(base + "/")
    page.wait_for_selector("#ai-panel[data-ready=true]", state="attached")

    fake_anthropic.replies.push(Reply(text="The **disk** of web-1 is full."))
    page.fill("#ai-input", "why is web-1 slow?")
    page.press("#ai-input", "Enter")
    expect(page.locator("#ai-log .ai-msg.from-model")).to_have_attribute("data-status", "complete")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#ai-reset").click()
    expect(page.locator("#ai-log .ai-msg")).to_have_count(0)

    page.locator("#ai-archive-link").click()
    page.wait_for_url("**/ai/archive/")
    row = page.locator(".archive-room tr[data-archive-id]")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("@alpha")
    expect(row).to_contain_text("why is web-1 slow?")
    screenshot(page, "archive-list")

    page.fill("#archive-search input[name=q]", "disk")
    page.locator("#archive-search button[type=submit]").click()
    results = page.locator("#search-results li[data-message-id]")
    expect(results).to_have_count(1)
    expect(results).to_contain_text("The disk of web-1 is full.")
    # Markdown rendered by the panel's safe renderer, not shown raw.
    expect(results.locator(".snippet strong")).to_have_text("disk")
    screenshot(page, "archive-search")
    results.locator("a").click()
    target = page.locator(".transcript-msg:target")
    expect(target).to_contain_text("The disk of web-1 is full.")
    expect(page.locator(".transcript-msg")).to_have_count(2)
    expect(target.locator(".transcript-text strong")).to_have_text("disk")
    assert "**disk**" not in target.inner_text()
    screenshot(page, "archive-conversation")

    # Continue: the room's live conversation is the archived one; the archive stays.
    with page.expect_navigation():
        page.locator("#archive-continue button").click()
    page.wait_for_selector("#ai-panel[data-ready=true]", state="attached")
    expect(page.locator("#ai-log .ai-msg")).to_have_count(2)
    expect(page.locator("#ai-log .ai-msg.from-model strong")).to_have_text("disk")
    expect(page.locator("#transcript .transcript-msg")).to_have_count(2)
    screenshot(page, "archive-continued")

    page.goto(base + "/ai/archive/")
    rows = page.locator(".archive-room tr[data-archive-id]")
    expect(rows).to_have_count(1)
    # Delete asks first: dismissing keeps it.
    page.once("dialog", lambda dialog: dialog.dismiss())
    rows.locator("button.danger").click()
    expect(rows).to_have_count(1)
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        rows.locator("button.danger").click()
    expect(rows).to_have_count(0)
    undo = page.locator("#archive-undo")
    expect(undo).to_contain_text("deleted")
    screenshot(page, "archive-deleted-undo")
    with page.expect_navigation():
        undo.locator("button").click()
    expect(rows).to_have_count(1)
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        rows.locator("button.danger").click()
    expect(rows).to_have_count(0)
