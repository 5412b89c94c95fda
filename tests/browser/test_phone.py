"""A paged operator on a phone (issue 24 item 2): 390 × 844, touch only. The menu folds
behind the Menu button, nothing scrolls sideways, a reply can be read in the panel below
the page, a write proposal is approved and a high-risk one goes through its three steps
(impact → retype the target → execute), all by tapping. Screenshots of the flow are saved
under test-artifacts/phone/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, login
from tests.browser.helpers import call, connect_model, expire_reauth, reauth
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"viewport": (390, 844), "has_touch": True, "is_mobile": True}
SHOTS = ARTIFACTS / "phone"


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def fits(page, selector: str) -> None:
    """No sideways page scroll, and the element lies inside the viewport's width."""
    width = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    b = page.locator(selector).bounding_box()
    assert b is not None and b["x"] >= 0 and b["x"] + b["width"] <= width, (selector, b)


def _setup(page_factory, base, operator, fake, key) -> tuple[int, int]:
    admin = page_factory()
    login(admin, base, operator)
    conn = connect_model(admin, base, operator, "alpha", fake, key)
    reauth(admin, base, operator)
    call(admin, base, "POST", "/api/servers", {"hostname": "web1.test"})
    call(admin, base, "POST", "/api/servers/web1.test/approve")
    rooms = call(admin, base, "GET", "/api/ai/rooms")["rooms"]
    unified = next(r for r in rooms if r["kind"] == "unified")["id"]
    fake.replies.push(Reply(text="The disk of **web1.test** is full: `/var/log` holds 41 GB."))
    call(admin, base, "POST", f"/api/ai/rooms/{unified}/messages", {"text": "why is web1 slow?"})
    admin.context.close()
    return conn["id"], unified


def _propose(operator, tool, args, conn_id, room_id):
    from hal.actions.base import Actor
    from hal.tools import run_tool_call

    actor = Actor(user=operator, via="ai", label=operator.username, session_key="chat")
    outcome = run_tool_call(
        tool, args, actor=actor, origin={"connection_id": conn_id, "room_id": room_id}
    )
    assert outcome.proposal is not None, outcome.error
    return outcome.proposal


def test_approve_and_confirm_high_risk_on_a_phone_by_touch(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    conn_id, room_id = _setup(page_factory, base, operator, fake_anthropic, provider_api_key)
    write = _propose(
        operator, "open_incident", {"severity": "sev3", "title": "Disk full web1"}, conn_id, room_id
    )
    high = _propose(
        operator,
        "isolate_server",
        {"server": "web1.test", "reason": "suspicious traffic"},
        conn_id,
        room_id,
    )
    page = page_factory(**PHONE)
    login(page, base, operator)
    expire_reauth(page)  # approving asks for the password again
    page.wait_for_selector("#ai-panel[data-ready=true]", state="attached")

    # The menu is folded behind the Menu button; the page does not scroll sideways.
    menu, toggle = page.locator("#menu"), page.locator("#menu-toggle")
    expect(menu).to_be_hidden()
    fits(page, "#topbar")
    shot(page, "01-overview")
    toggle.tap()
    expect(menu).to_be_visible()
    assert toggle.get_attribute("aria-expanded") == "true"
    fits(page, "#menu")
    shot(page, "02-menu-open")

    # The AI button brings the panel (below the page) into view; the reply is readable.
    toggle.tap()
    page.locator("#ai-panel-toggle").tap()
    reply = page.locator("#ai-log .ai-msg.from-model .ai-text")
    expect(reply).to_contain_text("/var/log holds 41 GB")
    expect(page.locator("#ai-input")).to_be_focused()
    page.wait_for_function(
        "() => Math.abs(document.getElementById('ai-panel').getBoundingClientRect().top"
        " - document.getElementById('topbar').getBoundingClientRect().bottom) < 40"
    )
    fits(page, "#ai-send")
    fits(page, "#ai-log .ai-msg.from-model")
    # Message actions are shown without hover on a touch screen, on one line.
    copy = page.locator("#ai-log .ai-msg.from-model .ai-copy")
    assert copy.evaluate("b => getComputedStyle(b).opacity") == "1"
    assert copy.get_attribute("aria-label")
    tops = page.locator("#ai-log .ai-msg.from-model .ai-msg-tools button").evaluate_all(
        "bs => bs.filter(b => b.checkVisibility())"
        ".map(b => Math.round(b.getBoundingClientRect().top))"
    )
    assert len(tops) >= 2 and len(set(tops)) == 1, tops  # Copy and Regenerate, one line
    shot(page, "03-panel-reply")
    page.locator("#ai-back-to-top").tap()
    page.wait_for_function("() => window.scrollY === 0")

    # The Approvals page: the cards fit; a write proposal is approved by tapping.
    page.goto(base + "/proposals/")
    page.wait_for_selector("body[data-proposals-ready=true]", state="attached")
    write_card = page.locator(f"#proposal-{write.pk}")
    high_card = page.locator(f"#proposal-{high.pk}")
    fits(page, f"#proposal-{write.pk}")
    fits(page, f"#proposal-{write.pk} .proposal-approve")
    shot(page, "04-approvals")
    write_card.locator(".proposal-approve").tap()
    dialog = page.locator("#ai-reauth")
    expect(dialog).to_be_visible()
    fits(page, "#ai-reauth-password")
    shot(page, "05-reauth")
    page.locator("#ai-reauth-password").fill(operator.raw_password)
    page.locator("#ai-reauth-submit").tap()
    expect(dialog).to_be_hidden()
    expect(write_card).to_have_attribute("data-status", "executed")
    shot(page, "06-write-approved")

    # High risk: impact → retype the target → execute, each step by tapping.
    high_card.locator(".proposal-impact-btn").scroll_into_view_if_needed()
    fits(page, f"#proposal-{high.pk} .proposal-impact-btn")
    high_card.locator(".proposal-impact-btn").tap()
    expect(high_card.locator(".proposal-target")).to_have_text("web1.test")
    retype = high_card.locator(".proposal-retype")
    fits(page, f"#proposal-{high.pk} .proposal-retype")
    shot(page, "07-high-risk-impact")
    # The phone keyboard neither capitalises nor corrects the identifier; the card says
    # that case counts; a capital is refused, a trailing space is not (issue 41).
    for name, value in (
        ("autocapitalize", "none"),
        ("autocomplete", "off"),
        ("autocorrect", "off"),
        ("spellcheck", "false"),
    ):
        assert retype.get_attribute(name) == value, name
    hint = page.locator("#" + retype.get_attribute("aria-describedby"))
    expect(hint).to_have_text("Case-sensitive: type it exactly as shown.")
    retype.tap()
    retype.fill("Web1.test")
    high_card.locator(".proposal-target-btn").tap()
    expect(high_card.locator(".proposal-error")).to_have_attribute(
        "data-code", "confirmation_mismatch"
    )
    retype.fill("web1.test ")
    high_card.locator(".proposal-target-btn").tap()
    execute = high_card.locator(".proposal-execute")
    expect(execute).to_be_enabled()
    fits(page, f"#proposal-{high.pk} .proposal-execute")
    shot(page, "08-high-risk-target-confirmed")
    execute.tap()
    expect(high_card).to_have_attribute("data-status", "executed")
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    shot(page, "09-high-risk-executed")
    from hal.models import Server

    assert Server.objects.get(hostname="web1.test").status == Server.ISOLATED
