"""The AI panel in a real browser: layout, saved state, tabs, and streaming conversations."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.bounds import WAIT_MS
from tests.browser.conftest import login, screenshot
from tests.browser.helpers import (
    box,
    call,
    connect_model,
    overlaps,
    reauth,
    saved_panel,
    wait_until,
)
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

READY = "#ai-panel[data-ready=true]"


def open_console(page, base_url: str, path: str = "/") -> None:
    page.goto(base_url + path)
    page.wait_for_selector(READY, state="attached")


def panel_width(page) -> float:
    return box(page, "#ai-panel")["width"]


def test_open_close_resize_are_saved_on_the_server(live_asgi, page_factory, operator):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    open_console(page, base)
    assert page.locator("#ai-panel").is_visible()
    assert page.locator("#ai-panel-toggle").get_attribute("aria-expanded") == "true"
    main_open = box(page, "#main")["width"]

    # Drag the left edge 150 px to the left: the panel grows by as much, the main area shrinks.
    start = panel_width(page)
    edge = box(page, "#ai-panel-resizer")
    y = edge["y"] + edge["height"] / 2
    page.mouse.move(edge["x"] + edge["width"] / 2, y)
    page.mouse.down()
    page.mouse.move(edge["x"] - 75, y, steps=4)
    page.mouse.move(edge["x"] - 150 + edge["width"] / 2, y, steps=4)
    page.mouse.up()
    assert abs(panel_width(page) - (start + 150)) <= 3
    assert box(page, "#main")["width"] < main_open - 140
    wide = panel_width(page)
    wait_until(lambda: abs(saved_panel(page, base)["width"] - wide) < 3)
    screenshot(page, "panel-resized")

    # Reload: the width comes back from the server.
    open_console(page, base, "/audit/")
    assert abs(panel_width(page) - wide) <= 3

    # Close with ×: the panel disappears, the main area takes its room; the state is saved.
    page.click("#ai-panel-close")
    expect(page.locator("#ai-panel")).to_be_hidden()
    assert page.locator("#ai-panel-toggle").get_attribute("aria-expanded") == "false"
    assert box(page, "#main")["width"] > main_open
    wait_until(lambda: saved_panel(page, base)["open"] is False)
    screenshot(page, "panel-closed")
    open_console(page, base)
    expect(page.locator("#ai-panel")).to_be_hidden()

    # Another browser (a fresh context, same operator) sees the same saved state.
    other = page_factory()
    login(other, base, operator)
    other.wait_for_selector(READY, state="attached")
    expect(other.locator("#ai-panel")).to_be_hidden()
    other.click("#ai-panel-toggle")
    expect(other.locator("#ai-panel")).to_be_visible()
    assert abs(panel_width(other) - wide) <= 3
    wait_until(lambda: saved_panel(other, base)["open"] is True)

    # ... and the first browser, reloaded, is open again.
    open_console(page, base)
    expect(page.locator("#ai-panel")).to_be_visible()


def test_keyboard_resize(live_asgi, page_factory, operator):
    page = page_factory()
    login(page, live_asgi.url, operator)
    open_console(page, live_asgi.url)
    start = panel_width(page)
    page.focus("#ai-panel-resizer")
    page.keyboard.press("Shift+ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert abs(panel_width(page) - (start + 60)) <= 2


@pytest.mark.parametrize("width", [1440, 1000])
def test_panel_never_covers_the_menu_or_top_bar(live_asgi, page_factory, operator, width):
    page = page_factory(viewport=(width, 800))
    login(page, live_asgi.url, operator)
    open_console(page, live_asgi.url, "/audit/")
    if width > 1100:
        panel, main = box(page, "#ai-panel"), box(page, "#main")
        for selector in ("#menu", "#topbar", "#main"):
            assert not overlaps(panel, box(page, selector)), selector
    # Every menu entry and the top bar's controls stay clickable (nothing on top of them).
    for selector in ("#menu a", "#ai-panel-toggle", "#lang-select"):
        for element in page.locator(selector).all():
            b = element.bounding_box()
            top = page.evaluate(
                "([x, y]) => document.elementFromPoint(x, y)?.closest('#menu, #topbar')?.id",
                [b["x"] + b["width"] / 2, b["y"] + b["height"] / 2],
            )
            assert top in ("menu", "topbar"), selector
    if width > 1100:
        assert panel["x"] >= main["x"] + main["width"] - 1  # on the right
        screenshot(page, "layout-panel-1440")
    else:
        # Below the page at full width (SPEC §3; issue 12's overlay drawer is withdrawn by
        # issue 24): never over the menu, the top bar or the page, and no resize handle.
        panel = box(page, "#ai-panel")
        for selector in ("#menu", "#topbar", "#main"):
            assert not overlaps(panel, box(page, selector)), selector
        main = box(page, "#main")
        assert panel["y"] >= main["y"] + main["height"] - 1
        assert panel["width"] >= width - 20
        assert not page.locator("#ai-panel-resizer").is_visible()
        screenshot(page, "layout-panel-1000")


def test_tabs_order_pin_rename(live_asgi, page_factory, operator):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    reauth(page, base, operator)
    # Connection order is creation order, not alphabetical.
    ids = [
        call(
            page,
            base,
            "POST",
            "/api/ai/connections",
            {"name": name, "provider": "anthropic", "auth_method": "api_key"},
        )["id"]
        for name in ("zeta", "alpha")
    ]
    call(page, base, "POST", f"/api/ai/connections/{ids[0]}/disable")
    open_console(page, base)
    tabs = page.locator("#ai-tabs [role=tab]")
    expect(tabs).to_have_text(["Unified", re.compile("^zeta"), re.compile("^alpha")])
    assert page.locator("#ai-tabs").get_attribute("role") == "tablist"
    assert tabs.nth(0).get_attribute("aria-selected") == "true"
    # A disabled connection's tab carries a status badge.
    expect(tabs.nth(1).locator(".badge")).to_have_text("disabled")
    assert page.locator("#ai-add").get_attribute("href").rstrip("/") == "/ops/ai"

    # Keyboard: arrows move the selection, Home goes back to the first tab.
    tabs.nth(0).focus()
    page.keyboard.press("ArrowRight")
    expect(tabs.nth(1)).to_have_attribute("aria-selected", "true")
    expect(tabs.nth(1)).to_be_focused()
    assert page.locator("#ai-room").get_attribute("aria-labelledby") == tabs.nth(1).get_attribute(
        "id"
    )
    page.keyboard.press("End")
    expect(tabs.nth(2)).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Home")
    expect(tabs.nth(0)).to_have_attribute("aria-selected", "true")

    # The pinned tab cannot be renamed: a double-click opens no field.
    tabs.nth(0).dblclick()
    page.wait_for_timeout(150)
    expect(page.locator(".ai-tab-rename")).to_have_count(0)
    expect(tabs.nth(0)).to_have_text("Unified")

    # Rename by double-click, Enter saves.
    tabs.nth(2).dblclick()
    field = page.locator(".ai-tab-rename")
    expect(field).to_be_focused()
    field.fill("Claude 감사")
    field.press("Enter")
    expect(tabs.nth(2)).to_have_text(re.compile("^Claude 감사"))

    # Escape cancels.
    tabs.nth(2).dblclick()
    page.locator(".ai-tab-rename").fill("not this")
    page.locator(".ai-tab-rename").press("Escape")
    expect(page.locator(".ai-tab-rename")).to_have_count(0)
    expect(tabs.nth(2)).to_have_text(re.compile("^Claude 감사"))

    # An empty name is refused: the field stays, marked invalid; nothing is saved.
    tabs.nth(1).dblclick()
    page.locator(".ai-tab-rename").fill("   ")
    page.locator(".ai-tab-rename").press("Enter")
    expect(page.locator(".ai-tab-rename")).to_have_attribute("aria-invalid", "true")
    assert page.locator(".ai-tab-rename").evaluate("el => el.validationMessage")
    page.locator(".ai-tab-rename").press("Escape")
    expect(tabs.nth(1)).to_have_text(re.compile("^zeta"))
    screenshot(page, "panel-tabs-renamed")

    # After a reload (and in the API) the rename persists; the selected tab is restored too.
    # Wait for the server to hold *this* tab's room: earlier selections (the keyboard, the
    # double-clicks) already saved other rooms, so "any room saved" raced the debounced
    # save and the reload then restored the previous tab.
    tabs.nth(2).click()
    chosen = int(tabs.nth(2).get_attribute("data-room-id"))
    wait_until(lambda: saved_panel(page, base)["active_room_id"] == chosen)
    open_console(page, base)
    expect(tabs).to_have_text(["Unified", re.compile("^zeta"), re.compile("^Claude 감사")])
    expect(tabs.nth(2)).to_have_attribute("aria-selected", "true")
    rooms = call(page, base, "GET", "/api/ai/rooms")["rooms"]
    assert [r["title"] for r in rooms][1:] == ["zeta", "Claude 감사"]


def _setup_two_models(page, base, operator, fake_anthropic, fake_openai, key):
    login(page, base, operator)
    alpha = connect_model(page, base, operator, "alpha", fake_anthropic, key)
    beta = connect_model(page, base, operator, "beta", fake_openai, key)
    return alpha, beta


def message(page, author: str):
    return page.locator(
        "#ai-log .ai-msg.from-model", has=page.locator(".ai-who .ai-name", has_text=author)
    )


def test_unified_room_streams_both_models(
    live_asgi, page_factory, operator, fake_anthropic, fake_openai, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    _setup_two_models(page, base, operator, fake_anthropic, fake_openai, provider_api_key)
    alpha_text = "Alpha checked the fleet: " + "all servers answer. " * 12
    beta_text = "Beta looked at releases: " + "nothing pending. " * 12
    fake_anthropic.replies.push(Reply(text=alpha_text, token_delay=0.06))
    fake_openai.replies.push(Reply(text=beta_text, token_delay=0.06))
    open_console(page, base, "/audit/")
    page.fill("#ai-input", "Status report, please.")
    page.press("#ai-input", "Enter")
    expect(page.locator("#ai-input")).to_have_value("")
    operator_msg = page.locator("#ai-log .ai-msg.from-operator")
    expect(operator_msg.locator(".ai-text")).to_have_text("Status report, please.")

    # Both replies are visible while they stream: partial text, marked as streaming.
    for author, full in (("alpha", alpha_text), ("beta", beta_text)):
        expect(message(page, author)).to_have_attribute("data-status", "streaming")
        page.wait_for_function(
            """([author, full]) => [...document.querySelectorAll('#ai-log .ai-msg')].some(li =>
                li.querySelector('.ai-who .ai-name').textContent === author &&
                li.dataset.status === 'streaming' &&
                li.querySelector('.ai-text').textContent.length > 10 &&
                li.querySelector('.ai-text').textContent.length < full.length)""",
            arg=[author, full],
        )
    screenshot(page, "panel-streaming")
    for author, full in (("alpha", alpha_text), ("beta", beta_text)):
        expect(message(page, author)).to_have_attribute("data-status", "complete", timeout=WAIT_MS)
        expect(message(page, author).locator(".ai-text")).to_have_text(full)
    # Speakers are distinguishable.
    classes = {message(page, a).get_attribute("class") for a in ("alpha", "beta")}
    assert len(classes) == 2
    screenshot(page, "panel-unified-complete")

    # The page was sent as context with the message.
    rooms = call(page, base, "GET", "/api/ai/rooms")["rooms"]
    msgs = call(page, base, "GET", f"/api/ai/rooms/{rooms[0]['id']}/messages")["messages"]
    sent = next(m for m in msgs if m["author_kind"] == "operator")
    assert sent["context"]["page"] == "audit" and sent["context"]["path"] == "/audit/"

    # A reload shows the same conversation (nothing lives only in the browser).
    open_console(page, base)
    expect(message(page, "alpha").locator(".ai-text")).to_have_text(alpha_text)
    expect(message(page, "beta").locator(".ai-text")).to_have_text(beta_text)


def test_at_name_addresses_one_model_with_autocomplete(
    live_asgi, page_factory, operator, fake_anthropic, fake_openai, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    _setup_two_models(page, base, operator, fake_anthropic, fake_openai, provider_api_key)
    open_console(page, base)
    fake_openai.replies.push(Reply(text="Only beta answers."))
    anthropic_before = len(fake_anthropic.message_requests)
    page.click("#ai-input")
    page.keyboard.type("@be")
    expect(page.locator("#ai-complete [role=option]")).to_have_text(["beta"])
    page.keyboard.press("Tab")
    expect(page.locator("#ai-input")).to_have_value("@beta ")
    expect(page.locator("#ai-complete")).to_be_hidden()
    page.keyboard.type("check the releases")
    page.keyboard.press("Enter")
    expect(message(page, "beta")).to_have_attribute("data-status", "complete")
    expect(message(page, "beta").locator(".ai-text")).to_have_text("Only beta answers.")
    page.wait_for_timeout(500)
    expect(message(page, "alpha")).to_have_count(0)
    assert len(fake_anthropic.message_requests) == anthropic_before

    # An unknown name is refused with its code, nothing is sent.
    page.fill("#ai-input", "@nobody hello")
    page.press("#ai-input", "Enter")
    expect(page.locator("#ai-send-error")).to_have_attribute("data-code", "unknown_addressee")
    expect(page.locator("#ai-input")).to_have_value("@nobody hello")
    # The sentence only: the code stays in data-code, never a prefix of the text.
    assert "unknown_addressee" not in page.locator("#ai-send-error").inner_text()

    # "@name to address one" only where several models could be addressed.
    field = page.locator("#ai-input")
    expect(field).to_have_attribute("placeholder", re.compile(r"@name to address one"))
    page.locator("#ai-tabs [role=tab]", has_text="beta").click()
    expect(field).to_have_attribute("placeholder", "Message @beta…")


def test_failing_provider_shows_its_failure_while_the_other_answers(
    live_asgi, page_factory, operator, fake_anthropic, fake_openai, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    _setup_two_models(page, base, operator, fake_anthropic, fake_openai, provider_api_key)
    open_console(page, base)
    fake_anthropic.fail_next("401")
    fake_openai.replies.push(Reply(text="Beta is fine."))
    page.fill("#ai-input", "Anyone there?")
    page.press("#ai-input", "Enter")
    expect(message(page, "beta")).to_have_attribute("data-status", "complete")
    failed = message(page, "alpha")
    expect(failed).to_have_attribute("data-status", "failed")
    code = failed.locator(".ai-status.error").get_attribute("data-code")
    assert code and code != "failed"
    expect(failed.locator(".ai-status.error")).to_contain_text(code)
    screenshot(page, "panel-provider-failed")


def test_individual_room_history_is_separate_and_pages_up(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    conn = connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    rooms = call(page, base, "GET", "/api/ai/rooms")["rooms"]
    room = next(r for r in rooms if r["connection_id"] == conn["id"])
    open_console(page, base)
    page.locator(f"#ai-tab-{room['id']}").click()
    fake_anthropic.replies.push(Reply(text="one to one"))
    page.fill("#ai-input", "just us")
    page.press("#ai-input", "Enter")
    expect(message(page, "alpha").locator(".ai-text")).to_have_text("one to one")
    # The unified room does not show the individual room's history.
    page.locator(f"#ai-tab-{rooms[0]['id']}").click()
    expect(page.locator("#ai-log .ai-msg")).to_have_count(0)

    # Many messages: the newest page loads first, scrolling up loads the older ones.
    page.locator(f"#ai-tab-{room['id']}").click()
    expect(page.locator("#ai-log .ai-msg")).to_have_count(2)
    fake_anthropic.replies.default = Reply(text="ok")
    for i in range(30):
        call(page, base, "POST", f"/api/ai/rooms/{room['id']}/messages", {"text": f"ping {i}"})

    def all_answered():
        msgs = call(page, base, "GET", f"/api/ai/rooms/{room['id']}/messages?limit=200")
        rows = msgs["messages"]
        return len(rows) == 62 and all(m["status"] == "complete" for m in rows)

    wait_until(all_answered)
    open_console(page, base)
    expect(page.locator("#ai-log .ai-msg")).to_have_count(50)
    page.locator("#ai-log").evaluate("el => { el.scrollTop = 0; }")
    expect(page.locator("#ai-log .ai-msg")).to_have_count(62)
    expect(page.locator("#ai-log .ai-msg").first.locator(".ai-text")).to_have_text("just us")
