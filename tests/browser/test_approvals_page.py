"""The Approvals page (issue 13 items 5–8): readable arguments and results, who proposed it,
the same three steps as the panel card with re-auth first, a visible wrong-target message,
and proposals that cannot succeed flagged and refused in the operator's language."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, connect_model, expire_reauth, reauth

pytestmark = pytest.mark.django_db(transaction=True)

READY = "body[data-proposals-ready=true]"


def _setup(page_factory, base, operator, fake, key, *, maintenance=False):
    """A connection "alpha", servers web1.test (active or in maintenance) and the
    operator's unified room; returns (connection id, unified room id)."""
    admin = page_factory()
    login(admin, base, operator)
    conn = connect_model(admin, base, operator, "alpha", fake, key)
    reauth(admin, base, operator)
    call(admin, base, "POST", "/api/servers", {"hostname": "web1.test"})
    call(admin, base, "POST", "/api/servers/web1.test/approve")
    if maintenance:
        from hal.models import Server

        Server.objects.filter(hostname="web1.test").update(status=Server.MAINTENANCE)
    rooms = call(admin, base, "GET", "/api/ai/rooms")["rooms"]
    unified = next(r for r in rooms if r["kind"] == "unified")
    admin.context.close()
    return conn["id"], unified["id"]


def _propose(operator, tool, args, conn_id, room_id):
    """A model's tool call in the operator's unified room, as the orchestrator makes it."""
    from hal.actions.base import Actor
    from hal.tools import run_tool_call

    actor = Actor(user=operator, via="ai", label=operator.username, session_key="chat")
    outcome = run_tool_call(
        tool, args, actor=actor, origin={"connection_id": conn_id, "room_id": room_id}
    )
    assert outcome.proposal is not None, outcome.error
    return outcome.proposal


def _approvals(page_factory, base, operator, *, width=1440):
    page = page_factory(viewport=(width, 900))
    login(page, base, operator)
    expire_reauth(page)  # the three steps must ask for the password first
    page.goto(base + "/proposals/")
    page.wait_for_selector(READY, state="attached")
    return page


def test_cards_read_well_and_high_risk_has_three_steps_with_reauth_first(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    conn_id, room_id = _setup(page_factory, base, operator, fake_anthropic, provider_api_key)
    write = _propose(
        operator,
        "open_incident",
        {"severity": "sev3", "title": "Disk full web1", "servers": ["web1.test"]},
        conn_id,
        room_id,
    )
    high = _propose(
        operator,
        "isolate_server",
        {"server": "web1.test", "reason": "suspicious traffic"},
        conn_id,
        room_id,
    )
    page = _approvals(page_factory, base, operator)
    write_card = page.locator(f"#proposal-{write.pk}")
    high_card = page.locator(f"#proposal-{high.pk}")

    # Item 5: a key/value list, never a Python dict; the JSON on demand.
    args = write_card.locator(".proposal-args dl.kv")
    expect(args.locator("dt", has_text="title")).to_be_visible()
    expect(args.locator("dd", has_text="Disk full web1")).to_be_visible()
    expect(args.locator("dd", has_text="web1.test")).to_be_visible()
    assert "{'" not in page.locator("#proposals-pending").inner_text()
    json_box = write_card.locator(".proposal-args details.proposal-json")
    expect(json_box.locator("pre")).to_be_hidden()
    json_box.locator("summary").click()
    expect(json_box.locator("pre")).to_contain_text('"title": "Disk full web1"')

    # Item 6: who proposed it, and the same tier labels as the panel.
    for card in (write_card, high_card):
        expect(card.locator(".proposal-origin")).to_have_text(
            "Proposed by @alpha in ops's Unified room"
        )
    expect(write_card.locator(".badge.tier-write")).to_have_text("Write")
    expect(high_card.locator(".badge.tier-high_risk")).to_have_text("High risk")
    expect(page.get_by_text("asked by")).to_have_count(0)
    screenshot(page, "approvals-pending")

    # Item 7: the three steps, numbered, as in the card; re-auth is asked before step 1.
    steps = high_card.locator(".proposal-steps > li")
    expect(steps).to_have_count(3)
    expect(high_card.locator(".proposal-approve")).to_have_count(0)
    expect(high_card.locator(".proposal-execute")).to_be_disabled()
    expect(high_card.locator(".proposal-retype")).to_be_disabled()
    high_card.locator(".proposal-impact-btn").click()
    dialog = page.locator("#ai-reauth")
    expect(dialog).to_be_visible()
    expect(high_card.locator(".proposal-target")).to_have_count(0)  # not before the password
    screenshot(page, "approvals-reauth-first")
    page.fill("#ai-reauth-password", operator.raw_password)
    page.click("#ai-reauth-submit")
    expect(dialog).to_be_hidden()
    expect(high_card.locator(".proposal-target")).to_have_text("web1.test")
    expect(high_card.locator(".proposal-impact-btn")).to_be_disabled()

    # A wrong target: the message is shown whole (wrapped inside the card, not cut off).
    high_card.locator(".proposal-retype").fill("web2.test")
    high_card.locator(".proposal-target-btn").click()
    error = high_card.locator(".proposal-error")
    expect(error).to_have_attribute("data-code", "confirmation_mismatch")
    expect(error).to_contain_text("does not match")
    card_box, error_box = high_card.bounding_box(), error.bounding_box()
    assert error_box["x"] >= card_box["x"] - 1
    assert error_box["x"] + error_box["width"] <= card_box["x"] + card_box["width"] + 1
    assert error.evaluate("e => e.scrollWidth <= e.clientWidth")
    expect(high_card.locator(".proposal-execute")).to_be_disabled()
    screenshot(page, "approvals-wrong-target")

    high_card.locator(".proposal-retype").fill("web1.test")
    high_card.locator(".proposal-target-btn").click()
    execute = high_card.locator(".proposal-execute")
    expect(execute).to_be_enabled()
    execute.click()
    expect(dialog).to_be_hidden()
    expect(high_card).to_have_attribute("data-status", "executed")
    # The executed result is readable too, in the Recent list.
    expect(page.locator("#proposals-recent").locator(f"#proposal-{high.pk}")).to_be_visible()
    result = high_card.locator(".proposal-result dl.kv")
    expect(result.locator("dt", has_text="hostname")).to_be_visible()
    expect(result.locator("dd", has_text="isolated").first).to_be_visible()
    screenshot(page, "approvals-executed")


def test_a_proposal_that_cannot_succeed_is_flagged_and_refused_in_korean(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    conn_id, room_id = _setup(
        page_factory, base, operator, fake_anthropic, provider_api_key, maintenance=True
    )
    p = _propose(
        operator,
        "set_server_maintenance",
        {"server": "web1.test", "enabled": True, "reason": "patch"},
        conn_id,
        room_id,
    )
    page = _approvals(page_factory, base, operator)
    card = page.locator(f"#proposal-{p.pk}")
    flag = card.locator(".proposal-precheck")
    expect(flag).to_have_attribute("data-code", "server_not_active")
    expect(flag).to_contain_text("web1.test is maintenance.")
    screenshot(page, "approvals-precheck")

    # In Korean: the flag and the refusal speak the operator's language.
    call(page, base, "POST", "/api/auth/reauth", {"password": operator.raw_password})
    with page.expect_navigation():
        page.select_option("#lang-select", "ko")
    page.goto(base + "/proposals/")
    page.wait_for_selector(READY, state="attached")
    card = page.locator(f"#proposal-{p.pk}")
    flag = card.locator(".proposal-precheck")
    expect(flag).to_have_attribute("data-code", "server_not_active")
    # The impact summary is in Korean on the page as in the panel.
    expect(card.locator(".proposal-impact")).to_contain_text("점검")
    flag_text = flag.inner_text()
    assert "Cannot succeed" not in flag_text and "web1.test" in flag_text
    card.locator(".proposal-approve").click()
    error = card.locator(".proposal-error")
    expect(error).to_have_attribute("data-code", "server_not_active")
    assert "web1.test" in error.inner_text()
    assert "is maintenance" not in error.inner_text()
    expect(card).to_have_attribute("data-status", "pending")
    screenshot(page, "approvals-precheck-ko")
    from hal.models import Server

    assert Server.objects.get(hostname="web1.test").status == Server.MAINTENANCE
