"""Regenerate and edit in the panel's unified room: versions navigable in place (‹ n/m ›),
an inline editor for the operator's last message (Enter saves, Esc cancels)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import connect_model
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_regenerate_and_edit_with_versions(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory(viewport=(1440, 900))
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    page.goto(base + "/")
    page.wait_for_selector("#ai-panel[data-ready=true]", state="attached")

    fake_anthropic.replies.push(Reply(text="first answer"))
    page.fill("#ai-input", "hello there")
    page.press("#ai-input", "Enter")
    replies = page.locator("#ai-log .ai-msg.from-model")
    expect(replies).to_have_count(1)
    expect(replies.first).to_have_attribute("data-status", "complete")
    expect(replies.first.locator(".ai-text")).to_have_text("first answer")

    # Regenerate: the new version replaces the reply in place, ‹ 2/2 › lets both be read.
    fake_anthropic.replies.push(Reply(text="second answer"))
    replies.first.locator(".ai-regenerate").click()
    expect(replies.first.locator(".ai-text")).to_have_text("second answer")
    expect(replies).to_have_count(1)
    expect(replies.first.locator(".ai-version-index")).to_have_text("2/2")
    expect(replies.first).to_have_attribute("data-status", "complete")
    screenshot(page, "panel-regenerated-2of2")
    replies.first.locator(".ai-version-prev").click()
    expect(replies.first.locator(".ai-text")).to_have_text("first answer")
    expect(replies.first.locator(".ai-version-index")).to_have_text("1/2")
    expect(replies.first.locator(".ai-version-prev")).to_be_disabled()

    # Edit the last message: Esc cancels, Enter saves a new version answered again.
    mine = page.locator("#ai-log .ai-msg.from-operator")
    mine.first.locator(".ai-edit").click()
    editor = mine.first.locator("textarea.ai-editor")
    expect(editor).to_be_focused()
    expect(editor).to_have_value("hello there")
    editor.press("Escape")
    expect(editor).to_have_count(0)
    expect(page.locator("#ai-panel")).to_be_visible()
    mine.first.locator(".ai-edit").click()
    fake_anthropic.replies.push(Reply(text="answer to the edit"))
    editor.fill("hello again")
    editor.press("Enter")
    expect(mine.first.locator(".ai-text")).to_have_text("hello again")
    expect(mine.first.locator(".ai-version-index")).to_have_text("2/2")
    expect(replies).to_have_count(1)
    expect(replies.first.locator(".ai-text")).to_have_text("answer to the edit")
    screenshot(page, "panel-edited-2of2")

    # The first version of the message brings back its own reply (with its versions).
    mine.first.locator(".ai-version-prev").click()
    expect(mine.first.locator(".ai-text")).to_have_text("hello there")
    expect(replies.first.locator(".ai-text")).to_have_text("first answer")
    expect(replies.first.locator(".ai-version-index")).to_have_text("1/2")
