"""What happens in a room between the panel's history load and its socket's first open is
shown: the first open resumes from the last message shown, as a reconnect does (before,
a reply that began in that window never appeared until a reload — CI met it as a flake of
test_stop_received_by_another_web_process under load)."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login
from tests.browser.helpers import call, connect_model
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

LIVE = "#ai-panel[data-live=true]"
ANSWER = "Alpha answered while the page was loading."


def test_a_reply_made_before_the_sockets_first_open_is_shown(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    room = call(page, base, "GET", "/api/ai/rooms")["rooms"][0]["id"]
    fake_anthropic.replies.push(Reply(text=ANSWER))
    loads: list[int] = []

    def history(route) -> None:
        # The panel gets the room as it is now; before the page can open its socket, a
        # message is sent (another tab) and alpha's reply to it ends.
        response = route.fetch()
        loads.append(response.status)
        if len(loads) == 1:
            call(page, base, "POST", f"/api/ai/rooms/{room}/messages", {"text": "from a tab"})
            deadline = time.monotonic() + 30
            while not any(
                m["status"] == "complete" and m["author_kind"] != "operator"
                for m in call(page, base, "GET", f"/api/ai/rooms/{room}/messages")["messages"]
            ):
                assert time.monotonic() < deadline, "alpha's reply did not end"
                time.sleep(0.1)
        route.fulfill(response=response)

    page.route(re.compile(r"/api/ai/rooms/\d+/messages\?limit="), history)
    page.goto(base + "/")
    page.wait_for_selector(LIVE, state="attached")
    assert loads == [200]
    reply = page.locator("#ai-log .ai-msg.from-model")
    expect(reply).to_have_attribute("data-status", "complete")
    expect(reply.locator(".ai-text")).to_have_text(ANSWER)
    expect(page.locator("#ai-log .ai-msg", has_text="from a tab")).to_have_count(1)
