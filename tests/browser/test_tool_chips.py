"""Tool-call chips in a real browser (issue 41, item 5): a proposal's chip follows its card to
the end — live, when another browser decides, and after a reload — and a tool the model
asked for that HAL does not have shows its name and says it is unknown, in both languages."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.bounds import WAIT_MS
from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call
from tests.browser.test_proposals_ui import READY, models_ready, say
from tests.fakes.script import Reply, ScriptedToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def chip(page, name: str):
    return page.locator("#ai-log .ai-msg .ai-tool-chip", has_text=name)


def test_a_proposals_chip_follows_its_card_live_and_after_a_reload(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    models_ready(page_factory, base, operator, fake_anthropic, provider_api_key)
    fake_anthropic.replies.push(
        Reply(
            text="Two incidents.",
            tool_calls=[
                ScriptedToolCall("open_incident", {"severity": "sev4", "title": "Approve me"}),
            ],
        ),
        Reply(
            text="And another.",
            tool_calls=[
                ScriptedToolCall("open_incident", {"severity": "sev4", "title": "Reject me"}),
            ],
        ),
        Reply(text="Done."),
    )
    page = page_factory()
    login(page, base, operator)
    page.wait_for_selector(READY, state="attached")
    say(page, "Open an incident.")
    opened = chip(page, "open_incident").first
    expect(opened).to_have_attribute("data-status", "pending")
    approved = page.locator("#ai-log .ai-proposal", has_text="Approve me")
    expect(approved).to_have_attribute("data-status", "pending")

    # Another browser approves: this one's card and chip follow, with no reload.
    other = page_factory()
    login(other, base, operator)  # logging in counts as a re-authentication
    first = call(other, base, "GET", "/api/ai/proposals?status=pending")["proposals"][0]
    call(other, base, "POST", f"/api/ai/proposals/{first['id']}/approve")
    expect(approved).to_have_attribute("data-status", "executed")
    expect(opened).to_have_attribute("data-status", "executed")
    expect(opened).to_have_class("ai-tool-chip executed")
    expect(opened.locator(".ai-tool-chip-state")).to_have_text("executed")

    # The model goes on and proposes again; this time the card here rejects it.
    closing = chip(page, "open_incident").nth(1)
    expect(closing).to_have_attribute("data-status", "pending", timeout=WAIT_MS)
    page.locator("#ai-log .ai-proposal", has_text="Reject me").locator(".proposal-reject").click()
    expect(closing).to_have_attribute("data-status", "rejected")
    screenshot(page, "tool-chips-settled")

    # A reload shows the chips as they ended (stored with the reply).
    page.reload()
    page.wait_for_selector(READY, state="attached")
    expect(chip(page, "open_incident").first).to_have_attribute("data-status", "executed")
    expect(chip(page, "open_incident").nth(1)).to_have_attribute("data-status", "rejected")
    replies = call(page, base, "GET", f"/api/ai/rooms/{first['room_id']}/messages")["messages"]
    shown = [c for m in replies for c in m.get("tool_calls", [])]
    assert [(c["name"], c["status"]) for c in shown] == [
        ("open_incident", "executed"),
        ("open_incident", "rejected"),
    ]


@pytest.mark.parametrize(
    ("locale", "word"), [("en-US", "unknown tool"), ("ko-KR", "알 수 없는 도구")]
)
def test_an_unknown_tools_chip_names_it_and_says_unknown(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key, locale, word
):
    base = live_asgi.url
    models_ready(page_factory, base, operator, fake_anthropic, provider_api_key)
    fake_anthropic.replies.push(
        Reply(text="", tool_calls=[ScriptedToolCall("run_shell", {"cmd": "uptime"})]),
        Reply(text="I have no shell."),
    )
    page = page_factory(locale=locale)
    login(page, base, operator)
    page.wait_for_selector(READY, state="attached")
    if locale.startswith("ko"):
        with page.expect_navigation():
            page.select_option("#lang-select", "ko")
    page.wait_for_selector(READY, state="attached")
    say(page, "What is the uptime?")
    unknown = chip(page, "run_shell")
    expect(unknown).to_have_attribute("data-status", "unknown")
    expect(unknown.locator(".ai-tool-chip-name")).to_have_text("run_shell")
    expect(unknown.locator(".ai-tool-chip-state")).to_have_text(word)
    expect(page.locator("#ai-log .ai-msg .ai-text", has_text="I have no shell.")).to_be_visible()
    screenshot(page, f"tool-chip-unknown-{locale}")
