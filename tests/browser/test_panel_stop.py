"""Stop in the browser: the Stop button of a streaming reply, Esc in the composer, and a
stop received by a second web process while the reply streams from the first."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.bounds import WAIT_MS
from tests.browser.conftest import LiveServer, login, screenshot
from tests.browser.helpers import call, connect_model
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

READY = "#ai-panel[data-ready=true]"
LONG = "streaming " * 600


def reply_of(page, author: str):
    return page.locator(
        "#ai-log .ai-msg.from-model", has=page.locator(".ai-who .ai-name", has_text=author)
    )


def test_stop_button_and_escape(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    page.goto(base + "/")
    page.wait_for_selector(READY, state="attached")

    fake_anthropic.replies.push(Reply(text=LONG, token_delay=0.05))
    page.fill("#ai-input", "talk")
    page.press("#ai-input", "Enter")
    reply = reply_of(page, "alpha")
    expect(reply).to_have_attribute("data-status", "streaming")
    expect(page.locator("#ai-stop-all")).to_be_visible()
    screenshot(page, "panel-stop-button")
    reply.locator("button.ai-stop").click()
    expect(reply).to_have_attribute("data-status", "complete")
    expect(reply.locator(".ai-status.stopped")).to_be_visible()
    expect(page.locator("#ai-stop-all")).to_be_hidden()
    kept = reply.locator(".ai-text").inner_text()
    assert 0 < len(kept) < len(LONG)
    # The tokens that streamed are counted (an estimate, marked ≈), never "0 → 0 tokens".
    expect(reply.locator(".ai-facts")).to_contain_text("≈ ")
    assert "0 → 0" not in reply.locator(".ai-facts").inner_text()
    screenshot(page, "panel-stopped")

    # Esc in the composer stops the room's streaming replies.
    fake_anthropic.replies.push(Reply(text=LONG, token_delay=0.05))
    page.fill("#ai-input", "again")
    page.press("#ai-input", "Enter")
    second = page.locator("#ai-log .ai-msg.from-model").nth(1)
    expect(second).to_have_attribute("data-status", "streaming")
    page.focus("#ai-input")
    page.keyboard.press("Escape")
    expect(second).to_have_attribute("data-status", "complete")
    expect(second.locator(".ai-status.stopped")).to_be_visible()


@pytest.mark.both_passes  # the stop crosses processes through the channel layer (Redis)
def test_stop_received_by_another_web_process(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key, tmp_path
):
    base = live_asgi.url
    other = LiveServer(tmp_path)  # a second daphne on the same database
    try:
        page = page_factory()
        login(page, base, operator)
        connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
        page.goto(base + "/")
        page.wait_for_selector(READY, state="attached")
        fake_anthropic.replies.push(Reply(text=LONG, token_delay=0.05))
        page.fill("#ai-input", "talk on the first process")
        page.press("#ai-input", "Enter")
        reply = reply_of(page, "alpha")
        expect(reply).to_have_attribute("data-status", "streaming")
        room = call(page, base, "GET", "/api/ai/rooms")["rooms"][0]["id"]
        running = [
            m
            for m in call(page, base, "GET", f"/api/ai/rooms/{room}/messages")["messages"]
            if m["status"] == "streaming"
        ]
        # The stop goes to the second process (same session cookie: cookies ignore ports).
        result = call(
            page, other.url, "POST", f"/api/ai/rooms/{room}/turns/{running[0]['turn_id']}/stop"
        )
        assert result["stopped"] == [running[0]["turn_id"]]
        expect(reply).to_have_attribute("data-status", "complete", timeout=WAIT_MS)
        expect(reply.locator(".ai-status.stopped")).to_be_visible()
    finally:
        other.stop()
