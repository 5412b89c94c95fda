"""A model follows a runbook that matches the operator's page and cites it as "title (v1)"."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, connect_model, reauth
from tests.fakes.script import Reply, ScriptedToolCall

pytestmark = pytest.mark.django_db(transaction=True)

READY = "#ai-panel[data-ready=true]"
TITLE = "Disk full on a web server"


def test_model_reads_the_page_runbook_and_cites_it(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    admin = page_factory()
    login(admin, base, operator)
    connect_model(admin, base, operator, "alpha", fake_anthropic, provider_api_key)
    made = call(
        admin,
        base,
        "POST",
        "/api/runbooks",
        {
            "title": TITLE,
            "body": "1. Read **get_metrics** for the server.\n2. Clean `/var/tmp`.",
            "tags": ["disk"],
            "scopes": {"pages": ["servers"]},
        },
    )
    runbook_id = made["runbook"]["id"]
    admin.context.close()

    fake_anthropic.replies.push(
        Reply(text="", tool_calls=[ScriptedToolCall("read_runbook", {"id": runbook_id})]),
        Reply(
            text=f"Following **{TITLE} (v1)**: first read `get_metrics` for the server.",
            tool_calls=[
                ScriptedToolCall(
                    "open_incident",
                    {
                        "severity": "sev3",
                        "title": "Disk full",
                        "runbook": {"id": runbook_id, "version": 1},
                    },
                )
            ],
        ),
        Reply(text="The incident awaits your approval."),
    )
    page = page_factory()
    login(page, base, operator)
    page.goto(base + "/servers/")
    page.wait_for_selector(READY, state="attached")
    page.fill("#ai-input", "The disk is full, what do I do?")
    page.press("#ai-input", "Enter")

    reply = page.locator("#ai-log .ai-text", has_text=f"{TITLE} (v1)")
    expect(reply).to_be_visible()
    expect(reply.locator("strong")).to_have_text(f"{TITLE} (v1)")  # rendered Markdown
    # The step it leads to is a proposal that records the runbook it came from.
    card = page.locator(
        "#ai-log .ai-proposal", has=page.locator("strong", has_text="open_incident")
    )
    expect(card).to_have_attribute("data-status", "pending")
    expect(card.locator(".proposal-runbook a")).to_have_text(f"{TITLE} (v1)")
    screenshot(page, "runbook-cited")

    first, second = fake_anthropic.message_requests[-2:]  # the turn now waits for approval
    assert f'"{TITLE}" (v1), id {runbook_id}' in str(first.json["system"])
    results = [
        block
        for message in second.json["messages"]
        for block in (message["content"] if isinstance(message["content"], list) else [])
        if block.get("type") == "tool_result"
    ]
    assert "Clean `/var/tmp`" in str(results[-1]["content"])

    # The Runbooks page renders the body with the panel's Markdown renderer.
    page.goto(base + f"/runbooks/{runbook_id}/")
    expect(page.locator("#runbook-body strong")).to_have_text("get_metrics")
    expect(page.locator("#runbook-body code")).to_have_text("/var/tmp")

    # Archived later: the proposal that cites it says so (the runbook is withdrawn).
    expect(page.locator("#runbook-body")).to_be_visible()
    reauth(page, base, operator)
    call(page, base, "POST", f"/api/runbooks/{runbook_id}/archive")
    page.goto(base + "/proposals/")
    archived = page.locator("#proposals-pending .proposal-card .proposal-runbook .runbook-archived")
    expect(archived).to_have_text("archived")
