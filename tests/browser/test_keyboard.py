"""Keyboard use of the console (issue 24 item 4): skip links, `?` for the shortcut list,
and the conversation as one tab stop (roving tabindex) so the composer is near."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, connect_model, wait_until
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

READY = "#ai-panel[data-ready=true]"


def focused(page) -> str:
    return page.evaluate(
        "() => { const e = document.activeElement;"
        " return e.id || e.className || e.tagName.toLowerCase(); }"
    )


def test_skip_links_and_the_shortcut_list(live_asgi, page_factory, operator):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    page.goto(base + "/audit/")
    page.wait_for_selector(READY, state="attached")

    # The first Tab stop is "Skip to content", shown when focused; it moves focus to main.
    page.keyboard.press("Tab")
    skip = page.locator(".skip-link", has_text="Skip to content")
    expect(skip).to_be_focused()
    b = skip.bounding_box()
    assert b is not None and b["y"] >= 0 and b["x"] >= 0
    screenshot(page, "skip-link")
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()

    # The second is "Skip to AI chat": the composer.
    page.goto(base + "/audit/")
    page.wait_for_selector(READY, state="attached")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.locator("#skip-to-ai")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#ai-input")).to_be_focused()

    # "?" typed in a field is text; elsewhere it opens the shortcut list, Esc closes it.
    page.keyboard.type("why?")
    expect(page.locator("#shortcuts")).to_be_hidden()
    expect(page.locator("#ai-input")).to_have_value("why?")
    page.locator("#main").focus()
    page.keyboard.press("?")
    dialog = page.locator("#shortcuts")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Alt")
    screenshot(page, "shortcut-list")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


def test_the_conversation_is_one_tab_stop(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    room = call(page, base, "GET", "/api/ai/rooms")["rooms"][0]["id"]
    from chatrooms.models import Message

    for i in range(5):
        fake_anthropic.replies.push(Reply(text=f"Answer {i}."))
        call(page, base, "POST", f"/api/ai/rooms/{room}/messages", {"text": f"Question {i}?"})
        wait_until(
            lambda i=i: Message.objects.filter(status="complete", text=f"Answer {i}.").exists()
        )
    page.goto(base + "/jobs/")
    page.wait_for_selector(READY, state="attached")
    items = page.locator("#ai-log > li.ai-msg")
    expect(items).to_have_count(10)

    # From the control before the conversation, Tab reaches the composer through the
    # latest message and its own actions only: not through the ten messages' buttons.
    page.locator("#ai-panel-close").focus()
    presses = 0
    while focused(page) != "ai-input":
        page.keyboard.press("Tab")
        presses += 1
        assert presses <= 5, f"Tab #{presses} is on {focused(page)}"
    assert presses >= 2  # the conversation itself was one stop on the way

    # Back into the list: the latest message; ↑/Home move inside it, Tab leaves it.
    page.keyboard.press("Shift+Tab")
    while page.evaluate("document.activeElement.parentElement?.id") != "ai-log":
        page.keyboard.press("Shift+Tab")
    last = items.last
    expect(last).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(items.nth(8)).to_be_focused()
    page.keyboard.press("Home")
    expect(items.first).to_be_focused()
    assert items.first.get_attribute("tabindex") == "0"
    assert last.get_attribute("tabindex") == "-1"
    assert last.locator("button.ai-copy").get_attribute("tabindex") == "-1"
    page.keyboard.press("End")
    expect(last).to_be_focused()
    screenshot(page, "conversation-roving-focus")
