"""Proposal cards in the AI panel: approve with inline re-auth, three steps, reject, live."""

from __future__ import annotations

import threading

import pytest
from playwright.sync_api import expect

from tests.bounds import WAIT_MS
from tests.browser.conftest import login, screenshot
from tests.browser.helpers import box, call, connect_model, expire_reauth, overlaps, reauth
from tests.fakes.script import Reply, ScriptedToolCall

pytestmark = pytest.mark.django_db(transaction=True)

READY = "#ai-panel[data-ready=true]"


def models_ready(page_factory, base, operator, fake, key, *, server: str | None = None):
    """Set up through another session (so the operator's own browser is not re-authenticated)."""
    admin = page_factory()
    login(admin, base, operator)
    connect_model(admin, base, operator, "alpha", fake, key)
    if server:
        reauth(admin, base, operator)
        call(admin, base, "POST", "/api/servers", {"hostname": server})
        call(admin, base, "POST", f"/api/servers/{server}/approve")
    admin.context.close()


def console(page_factory, base, operator, viewport=(1440, 900)):
    page = page_factory(viewport=viewport)
    login(page, base, operator)
    expire_reauth(page)  # approvals must ask for the password again
    page.wait_for_selector(READY, state="attached")
    return page


def say(page, text: str) -> None:
    page.fill("#ai-input", text)
    page.press("#ai-input", "Enter")
    expect(page.locator("#ai-input")).to_have_value("")


def card(page, tool: str):
    return page.locator("#ai-log .ai-proposal", has=page.locator("strong", has_text=tool))


def test_write_proposal_approved_with_inline_reauth(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    models_ready(page_factory, base, operator, fake_anthropic, provider_api_key)
    fake_anthropic.replies.push(
        Reply(
            text="I will open an incident.",
            tool_calls=[
                ScriptedToolCall("open_incident", {"severity": "sev3", "title": "Disk full web1"})
            ],
        ),
        Reply(text="The incident is open."),
    )
    page = console(page_factory, base, operator)
    say(page, "Open an incident for the full disk.")
    proposal = card(page, "open_incident")
    expect(proposal).to_have_attribute("data-status", "pending")
    expect(proposal.locator(".proposal-args")).to_contain_text("Disk full web1")
    expect(proposal.locator(".badge.tier-write")).to_be_visible()
    # The reply shows its tool call as a chip, marked as a proposal waiting (issue 26).
    chip = page.locator("#ai-log .ai-msg .ai-tool-chip.pending", has_text="open_incident")
    expect(chip).to_be_visible()
    screenshot(page, "proposal-pending")

    # The approvals page, at both widths: the panel never covers its approve buttons.
    for width in (1440, 1000):
        approvals = page_factory(viewport=(width, 800))
        login(approvals, base, operator)
        approvals.goto(base + "/proposals/")
        approvals.wait_for_selector(READY, state="attached")
        buttons = approvals.locator(
            "#proposals-pending .proposal-approve, #proposals-pending .proposal-reject"
        ).all()
        assert buttons
        # Narrow (≤ 1100 px): the panel is below the page at full width (SPEC §3).
        panel = box(approvals, "#ai-panel")
        for button in buttons:
            assert not overlaps(panel, button.bounding_box())
        for selector in ("#menu", "#topbar"):
            assert not overlaps(panel, box(approvals, selector))
        approvals.context.close()

    # Approve: re-auth is needed, the panel asks inline; a wrong password is refused.
    proposal.locator(".proposal-approve").click()
    dialog = page.locator("#ai-reauth")
    expect(dialog).to_be_visible()
    screenshot(page, "proposal-reauth-dialog")
    page.fill("#ai-reauth-password", "wrong-" + operator.raw_password)
    page.click("#ai-reauth-submit")
    expect(page.locator("#ai-reauth-error")).not_to_be_empty()
    expect(dialog).to_be_visible()
    expect(proposal).to_have_attribute("data-status", "pending")
    page.fill("#ai-reauth-password", operator.raw_password)
    page.click("#ai-reauth-submit")
    expect(dialog).to_be_hidden()
    # ... then the approval continues by itself and the action runs.
    expect(proposal).to_have_attribute("data-status", "executed")
    expect(proposal.locator(".proposal-actions")).to_have_count(0)
    expect(proposal.locator(".proposal-result")).to_be_visible()
    # The model hears the outcome and answers.
    expect(
        page.locator("#ai-log .ai-msg .ai-text", has_text="The incident is open.")
    ).to_be_visible()
    screenshot(page, "proposal-executed")
    proposals = call(page, base, "GET", "/api/ai/proposals")["proposals"]
    assert [p["status"] for p in proposals] == ["executed"]

    # A reload keeps the decided card next to its message.
    page.reload()
    page.wait_for_selector(READY, state="attached")
    expect(card(page, "open_incident")).to_have_attribute("data-status", "executed")


def test_high_risk_three_steps_inside_the_card(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    models_ready(page_factory, base, operator, fake_anthropic, provider_api_key, server="web1.test")
    fake_anthropic.replies.push(
        Reply(
            text="Isolating web1.",
            tool_calls=[
                ScriptedToolCall(
                    "isolate_server", {"server": "web1.test", "reason": "suspicious traffic"}
                )
            ],
        ),
        Reply(text="web1 is isolated."),
    )
    page = console(page_factory, base, operator)
    say(page, "Isolate web1 now.")
    proposal = card(page, "isolate_server")
    expect(proposal).to_have_attribute("data-tier", "high_risk")
    # No one-click approval for high risk: the three steps, only the first one enabled.
    expect(proposal.locator(".proposal-approve")).to_have_count(0)
    expect(proposal.locator(".proposal-steps > li")).to_have_count(3)
    expect(proposal.locator(".proposal-execute")).to_be_disabled()

    # Step 1: impact — the stale re-auth is asked for first, inline.
    proposal.locator(".proposal-impact-btn").click()
    expect(page.locator("#ai-reauth")).to_be_visible()
    page.fill("#ai-reauth-password", operator.raw_password)
    page.click("#ai-reauth-submit")
    expect(proposal.locator(".proposal-impact-btn")).to_be_disabled()
    expect(proposal.locator(".proposal-impact-detail")).to_be_visible()
    expect(proposal.locator(".proposal-target")).to_have_text("web1.test")
    execute = proposal.locator(".proposal-execute")
    expect(execute).to_be_disabled()
    screenshot(page, "proposal-high-risk-impact")

    # Step 2: the target retyped — a wrong one is refused, execute stays disabled.
    proposal.locator(".proposal-retype").fill("web2.test")
    proposal.locator(".proposal-target-btn").click()
    expect(proposal.locator(".proposal-error")).not_to_have_attribute("data-code", "")
    expect(execute).to_be_disabled()
    proposal.locator(".proposal-retype").fill("web1.test")
    proposal.locator(".proposal-target-btn").click()
    expect(execute).to_be_enabled()

    # Step 3: execute — the password was given before step 1, so it just runs.
    execute.click()
    expect(page.locator("#ai-reauth")).to_be_hidden()
    expect(proposal).to_have_attribute("data-status", "executed")
    expect(page.locator("#ai-log .ai-msg .ai-text", has_text="web1 is isolated.")).to_be_visible()
    screenshot(page, "proposal-high-risk-executed")
    server = call(page, base, "GET", "/api/servers/web1.test")["server"]
    assert server["status"] == "isolated"


def test_reject_and_live_update_in_another_browser(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    models_ready(page_factory, base, operator, fake_anthropic, provider_api_key)
    first = console(page_factory, base, operator)
    second = console(page_factory, base, operator)
    fake_anthropic.replies.push(
        Reply(
            text="Two incidents.",
            tool_calls=[
                ScriptedToolCall("open_incident", {"severity": "sev4", "title": "Rejected one"})
            ],
        ),
        Reply(
            text="Another one.",
            tool_calls=[
                ScriptedToolCall("open_incident", {"severity": "sev4", "title": "Approved one"})
            ],
        ),
        Reply(text="Done."),
    )
    say(first, "Open incidents, please.")
    rejected_a = first.locator(".ai-proposal", has_text="Rejected one")
    rejected_b = second.locator(".ai-proposal", has_text="Rejected one")
    # The card appears live in the other browser too.
    expect(rejected_b).to_have_attribute("data-status", "pending")
    rejected_a.locator(".proposal-reject").click()
    expect(rejected_a).to_have_attribute("data-status", "rejected")
    expect(rejected_b).to_have_attribute("data-status", "rejected")
    expect(rejected_b.locator(".proposal-reject")).to_have_count(0)

    approved_a = first.locator(".ai-proposal", has_text="Approved one")
    approved_b = second.locator(".ai-proposal", has_text="Approved one")
    expect(approved_b).to_have_attribute("data-status", "pending", timeout=WAIT_MS)
    reauth(first, base, operator)
    approved_a.locator(".proposal-approve").click()
    expect(approved_a).to_have_attribute("data-status", "executed")
    expect(approved_b).to_have_attribute("data-status", "executed")
    expect(approved_b.locator(".proposal-approve")).to_have_count(0)
    screenshot(second, "proposal-live-update-other-browser")
    statuses = {
        p["arguments"]["title"]: p["status"]
        for p in call(first, base, "GET", "/api/ai/proposals")["proposals"]
    }
    assert statuses == {"Rejected one": "rejected", "Approved one": "executed"}


def test_tool_chips_show_while_the_reply_streams(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    """A tool call's chip appears as the call ends, while the reply still streams (issue
    26: `message.tools`), and stays on the finished reply."""
    base = live_asgi.url
    models_ready(page_factory, base, operator, fake_anthropic, provider_api_key)
    fake_anthropic.replies.push(
        Reply(text="", tool_calls=[ScriptedToolCall("list_servers", {})]),
        Reply(text="No servers are registered yet."),
    )
    page = console(page_factory, base, operator)
    # The answer after the tool call holds after its first word: the reply streams on.
    fake_anthropic.hold_after_first_chunk = threading.Event()
    try:
        say(page, "Which servers are there?")
        streaming = page.locator("#ai-log .ai-msg[data-status=streaming]")
        expect(streaming.locator(".ai-tool-chip.ok", has_text="list_servers")).to_be_visible()
        screenshot(page, "tool-chip-live")
    finally:
        fake_anthropic.hold_after_first_chunk.set()
    done = page.locator("#ai-log .ai-msg[data-status=complete]", has_text="registered yet")
    expect(done.locator(".ai-tool-chip.ok", has_text="list_servers")).to_have_count(1)
