"""The panel's "New conversation" in a real browser: confirm, clear, and what the model sees."""

from __future__ import annotations

import json
import secrets

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, connect_model, saved_panel, wait_until
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

READY = "#ai-panel[data-ready=true]"


def open_console(page, base_url: str) -> None:
    page.goto(base_url + "/")
    page.wait_for_selector(READY, state="attached")


def sent_to_model(request) -> str:
    """Everything a Messages API request carried (system prompt, history, new turn)."""
    return json.dumps(request.json, ensure_ascii=False)


def room_messages(page, base: str, room_id: int) -> list[dict]:
    return call(page, base, "GET", f"/api/ai/rooms/{room_id}/messages")["messages"]


def test_new_conversation_clears_history_everywhere_and_for_the_model(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    conn = connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    room = next(
        r
        for r in call(page, base, "GET", "/api/ai/rooms")["rooms"]
        if r["connection_id"] == conn["id"]
    )
    open_console(page, base)
    page.locator(f"#ai-tab-{room['id']}").click()
    wait_until(lambda: saved_panel(page, base)["active_room_id"] == room["id"])
    log = page.locator("#ai-log .ai-msg")

    # Two exchanges; the second request proves the model is normally given the history.
    marker = "codeword-" + secrets.token_hex(4)
    fake_anthropic.replies.push(Reply(text="Noted."), Reply(text="Still noted."))
    page.fill("#ai-input", f"Remember {marker}.")
    page.press("#ai-input", "Enter")
    expect(log.last).to_have_attribute("data-status", "complete")
    expect(log.last.locator(".ai-text")).to_have_text("Noted.")
    page.fill("#ai-input", "Anything else?")
    page.press("#ai-input", "Enter")
    expect(log).to_have_count(4)
    expect(log.last.locator(".ai-text")).to_have_text("Still noted.")
    assert marker in sent_to_model(fake_anthropic.message_requests[-1])

    # Another browser of the same operator shows the same room (saved panel state).
    other = page_factory()
    login(other, base, operator)
    other.wait_for_selector(READY, state="attached")
    expect(other.locator(f"#ai-tab-{room['id']}")).to_have_attribute("aria-selected", "true")
    expect(other.locator("#ai-log .ai-msg")).to_have_count(4)
    screenshot(page, "panel-reset-before")

    # Dismissing the confirm dialog changes nothing: no request is even sent.
    dialogs: list[tuple[str, str]] = []
    resets: list[str] = []
    page.on("request", lambda r: resets.append(r.url) if r.url.endswith("/reset") else None)

    def dismiss(dialog) -> None:
        dialogs.append((dialog.type, dialog.message))
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("#ai-reset")
    wait_until(lambda: dialogs)
    assert dialogs[0][0] == "confirm" and dialogs[0][1]
    page.wait_for_timeout(300)  # room for a (wrong) request or re-render to happen
    assert resets == []
    expect(log).to_have_count(4)
    assert len(room_messages(page, base, room["id"])) == 4

    # Accepting clears this panel, the other browser's panel, and the stored history.
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#ai-reset")
    expect(log).to_have_count(0)
    expect(other.locator("#ai-log .ai-msg")).to_have_count(0)
    assert room_messages(page, base, room["id"]) == []
    assert len(resets) == 1
    screenshot(other, "panel-reset-other-browser")

    # The model's next request carries the new message only, none of the old turns.
    before = len(fake_anthropic.message_requests)
    fake_anthropic.replies.push(Reply(text="A clean slate."))
    page.fill("#ai-input", "What do you remember?")
    page.press("#ai-input", "Enter")
    expect(log).to_have_count(2)
    expect(log.last.locator(".ai-text")).to_have_text("A clean slate.")
    expect(other.locator("#ai-log .ai-msg")).to_have_count(2)
    requests = fake_anthropic.message_requests[before:]
    assert len(requests) == 1
    body = sent_to_model(requests[0])
    assert "What do you remember?" in body
    for old in (marker, "Anything else?", "Noted.", "Still noted."):
        assert old not in body, old
    turns = requests[0].json["messages"]
    assert [m["role"] for m in turns] == ["user"], turns
    screenshot(page, "panel-reset-after")


def test_new_conversation_while_a_reply_streams_leaves_no_ghost(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    unified = call(page, base, "GET", "/api/ai/rooms")["rooms"][0]
    open_console(page, base)
    log = page.locator("#ai-log .ai-msg")
    partial = "Counting servers " + "one more, " * 60
    fake_anthropic.replies.push(Reply(text=partial, token_delay=0.05))
    page.fill("#ai-input", "Count them slowly.")
    page.press("#ai-input", "Enter")
    reply = page.locator("#ai-log .ai-msg.from-model")
    expect(reply).to_have_attribute("data-status", "streaming")
    expect(reply.locator(".ai-text")).to_contain_text("one more, one more")

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#ai-reset")
    expect(log).to_have_count(0)
    # The stream would have run ~3 s more; late deltas or a final event must not bring the
    # deleted reply back, and nothing of it is stored.
    page.wait_for_timeout(1500)
    expect(log).to_have_count(0)
    assert room_messages(page, base, unified["id"]) == []

    # The next message is answered normally, without the interrupted turn.
    before = len(fake_anthropic.message_requests)
    fake_anthropic.replies.push(Reply(text="Fresh start."))
    page.fill("#ai-input", "Hello again.")
    page.press("#ai-input", "Enter")
    expect(page.locator("#ai-log .ai-msg.from-model .ai-text")).to_have_text("Fresh start.")
    expect(log).to_have_count(2)
    body = sent_to_model(fake_anthropic.message_requests[before])
    assert "Count them slowly." not in body and "one more" not in body
    screenshot(page, "panel-reset-mid-stream")
