"""A room's history and its live events race: what arrives on the socket while the history
is on its way must still be on screen once the history is shown (seen failing in CI: a
reply announced as complete, then wiped from the log by the history read before it)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login
from tests.browser.helpers import call, connect_model, wait_until
from tests.browser.test_panel import message, open_console
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reply_that_ends_while_the_room_loads_stays_on_screen(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    conn = connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    rooms = call(page, base, "GET", "/api/ai/rooms")["rooms"]
    room = next(r for r in rooms if r["connection_id"] == conn["id"])
    open_console(page, base)

    # The room's history is read by the server at once, but reaches the page only after the
    # conversation below has happened: the page gets a snapshot older than what it saw live.
    held = []
    page.route(
        re.compile(rf"/api/ai/rooms/{room['id']}/messages\?limit="),
        lambda route: held.append((route, route.fetch())),
    )
    page.locator(f"#ai-tab-{room['id']}").click()
    wait_until(lambda: held or page.wait_for_timeout(50))  # playwright runs the route

    fake_anthropic.replies.push(Reply(text="one to one"))
    page.fill("#ai-input", "just us")
    page.press("#ai-input", "Enter")

    def replied():
        rows = call(page, base, "GET", f"/api/ai/rooms/{room['id']}/messages")["messages"]
        return any(m["author_kind"] == "model" and m["status"] == "complete" for m in rows)

    wait_until(replied)  # the reply's events have all been sent to the page by now

    route, response = held[0]
    route.fulfill(response=response)
    expect(message(page, "alpha").locator(".ai-text")).to_have_text("one to one")
    expect(message(page, "alpha")).to_have_attribute("data-status", "complete")
    expect(page.locator("#ai-log .ai-msg.from-operator")).to_have_count(1)
    # Nothing is shown twice, and what came live sits after what the history held.
    expect(page.locator("#ai-log .ai-msg")).to_have_count(2)
    order = page.locator("#ai-log .ai-msg").evaluate_all(
        "(els) => els.map((el) => Number(el.dataset.messageId))"
    )
    assert order == sorted(order), order
