"""Touch targets on a phone (issue 41 item 6): every page at 390 × 844 with touch emulation
(`has_touch`, `is_mobile`: the browser reports a coarse pointer), and the states that show
more controls — the menu open, a reply streaming (Stop, Stop all), a regenerated reply
(version arrows), a code block (Copy), a high-risk card at its retype step, the fleet
pages' three-step dialog, the re-authentication dialog. Every visible button, link, field,
select and summary must be at least 44 × 44 px (a check box: its label), and every field's
text at least 16 px (iOS Safari zooms into smaller ones).

Exempt, on purpose: links inside written content (a reply's or a runbook's Markdown,
`.ai-text`) — they are words in a sentence (WCAG 2.5.5's inline exception)."""

from __future__ import annotations

import json

import pytest
from django.urls import resolve
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, login
from tests.browser.helpers import call, expire_reauth
from tests.browser.test_layout_pages import PAGES, READY, seed
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"viewport": (390, 844), "has_touch": True, "is_mobile": True}
SHOTS = ARTIFACTS / "touch"
# Pages the width matrix of test_layout_pages.py does not visit; checked here too.
MORE_PAGES = [
    ("incident-room", "/incidents/{incident}/room/"),
    ("mcp-access", "/mcp-access/"),
    ("reauth", "/reauth/"),
    ("alert-sources", "/alerts/"),
    # Pages outside the console's menu: an MCP client's consent page and a share link's.
    ("mcp-consent", "/oauth/authorize?{consent}"),
    ("shared", "/ai/shared/{share}"),
]

MEASURE = """() => {
  const problems = [];
  const sel = 'button, a[href], input:not([type=hidden]), select, textarea, summary';
  for (const el of document.querySelectorAll(sel)) {
    if (!el.checkVisibility({visibilityProperty: true})) continue;
    if (el.matches('a') && el.closest('.ai-text')) continue;  // a link in written content
    let target = el;
    if (el.matches('input[type=checkbox], input[type=radio]'))
      target = el.closest('label') || (el.labels && el.labels[0]) || el;
    const r = target.getBoundingClientRect();
    if (!r.width && !r.height) continue;
    const where = el.closest('#ai-panel') ? 'panel' : el.closest('#topbar') ? 'top bar'
      : el.closest('#menu') ? 'menu' : el.closest('dialog') ? 'dialog' : 'page';
    const cls = typeof el.className === 'string' && el.className.trim()
      ? '.' + el.className.trim().split(/\\s+/).join('.') : '';
    const text = (el.textContent || el.getAttribute('aria-label') || el.name || '').trim();
    const name = `${where}: ${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}${cls}` +
      ` "${text.slice(0, 24)}"`;
    if (r.width < 43.5 || r.height < 43.5)
      problems.push(`${name} is ${Math.round(r.width)}×${Math.round(r.height)} px`);
    const field = 'input:not([type=checkbox]):not([type=radio]):not([type=range]), select, '
      + 'textarea';
    if (el.matches(field)) {
      const size = parseFloat(getComputedStyle(el).fontSize);
      if (size < 16) problems.push(`${name} has ${size} px text`);
    }
  }
  return problems;
}"""


def _check(page, where: str, problems: dict, show: str | None = None) -> None:
    found = page.evaluate(MEASURE)
    if found:
        problems[where] = found
    SHOTS.mkdir(parents=True, exist_ok=True)
    if show:
        page.locator(show).first.scroll_into_view_if_needed()
    # The viewport only: a full-page screenshot drops the touch emulation while it shoots.
    page.screenshot(path=str(SHOTS / f"{where}.png"))


def test_every_page_lists_itself():
    """The pages checked here are every HTML route of the URL conf (a new page is added)."""
    from tests.core.test_korean_pages import NOT_PAGES, page_routes

    routes = {name for name in page_routes() if name not in NOT_PAGES}
    seen = {resolve(path.split("?")[0].format(**IDS)).url_name for _, path in PAGES + MORE_PAGES}
    seen.add("login")  # checked before logging in
    # The SSO step-up window's last page: a sentence and no control (it closes itself;
    # tests/browser/test_sso.py drives it).
    seen.add("oidc_reauth_done")
    assert routes <= seen, sorted(routes - seen)


IDS = {"server": 1, "job": 1, "incident": 1, "runbook": 1, "archive": 1, "room": 1, "share": "x"}


@pytest.mark.parametrize("half", [0, 1])
def test_every_control_is_big_enough_to_tap(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key, half
):
    base = live_asgi.url
    page = page_factory(**PHONE)
    problems: dict[str, list] = {}
    if half == 0:
        page.goto(base + "/login/")
        _check(page, "login", problems)
    login(page, base, operator)
    ids = seed(page, base, operator, fake_anthropic, provider_api_key)
    ids.update(outside_pages(base, operator))
    pages = PAGES + MORE_PAGES
    mine = pages[half::2]
    for name, path in mine:
        page.goto(base + path.format(**ids), wait_until="domcontentloaded")
        if name not in OUTSIDE:
            page.wait_for_selector(READY, state="attached")
        _check(page, name, problems)
    # The menu and the top bar's preferences, unfolded.
    if half == 0:
        page.goto(base + "/")
        page.wait_for_selector(READY, state="attached")
        page.locator("#menu-toggle").tap()
        expect(page.locator("#menu")).to_be_visible()
        _check(page, "menu-open", problems)
    else:
        _states(page, base, operator, fake_anthropic, ids, problems)
    assert not problems, json.dumps(problems, indent=1, ensure_ascii=False)


# Pages without the console's layout (no ready mark to wait for).
OUTSIDE = {"reauth", "mcp-consent", "shared"}


def outside_pages(base: str, operator) -> dict[str, str]:
    """A registered MCP client's pending authorization request (its query) and a share link
    of a colleague's room to `operator` (its token), as the Korean pages test makes them."""
    from urllib.parse import urlsplit

    from django.test import Client as DjangoClient

    from tests.core.test_korean_pages import _share_link
    from tests.mcp.test_mcp_oauth import authorize_url, pkce, register

    registered = register(DjangoClient(), client_name="MCP Inspector")
    consent = authorize_url(registered["client_id"], pkce()[1], resource=base + "/mcp")
    return {"consent": urlsplit(consent).query, "share": _share_link(operator).rsplit("/", 1)[1]}


def _states(page, base: str, operator, fake, ids: dict, problems: dict) -> None:
    """The controls that appear only in some states."""
    from hal.actions.base import Actor
    from hal.tools import run_tool_call

    room = ids["room"]
    # A reply streaming: its Stop and the composer's Stop all.
    fake.replies.push(Reply(text="word " * 400, token_delay=0.05))
    page.goto(base + "/")
    page.wait_for_selector(READY, state="attached")
    page.locator("#ai-panel-toggle").tap()
    page.fill("#ai-input", "tell me everything")
    page.locator("#ai-send").tap()
    expect(page.locator("#ai-stop-all")).to_be_visible()
    expect(page.locator("#ai-log .ai-stop").first).to_be_visible()
    _check(page, "panel-streaming", problems, "#ai-stop-all")
    page.locator("#ai-stop-all").tap()
    expect(page.locator("#ai-stop-all")).to_be_hidden()
    # A regenerated reply: ‹ 2/2 › arrows.
    fake.replies.push(Reply(text="a second answer"))
    last = page.locator("#ai-log .ai-msg.from-model").last
    last.locator(".ai-regenerate").tap()
    expect(last.locator(".ai-version-index")).to_have_text("2/2")
    # Checked once the new version has completed: the panel draws a reply's row again when
    # it completes, and a row replaced while the check scrolled to it was "not attached to
    # the DOM" (CI, a busy machine: the 2/2 arrows showed while it still streamed).
    done = "#ai-log .ai-msg.from-model[data-status=complete]"
    expect(page.locator(done, has_text="a second answer")).to_have_count(1)
    _check(page, "panel-versions", problems, f"{done} >> nth=-1")

    # A high-risk card at its retype step, and the re-authentication dialog.
    actor = Actor(user=operator, via="ai", label=operator.username, session_key="chat")
    conn = call(page, base, "GET", "/api/ai/connections")["connections"][0]["id"]
    origin = {"connection_id": conn, "room_id": room}
    high = run_tool_call(
        "isolate_server",
        {"server": "web-01.example.internal", "reason": "suspicious traffic"},
        actor=actor,
        origin=origin,
    ).proposal
    run_tool_call(
        "approve_server", {"server": "new-01.example.internal"}, actor=actor, origin=origin
    )
    page.goto(base + "/proposals/")
    page.wait_for_selector("body[data-proposals-ready=true]", state="attached")
    card = page.locator(f"#proposals-pending #proposal-{high.pk}")
    card.locator(".proposal-impact-btn").tap()
    expect(card.locator(".proposal-retype")).to_be_enabled()
    _check(
        page,
        "approvals-retype",
        problems,
        f"#proposals-pending #proposal-{high.pk} .proposal-steps",
    )
    expire_reauth(page)
    page.reload()
    page.wait_for_selector("body[data-proposals-ready=true]", state="attached")
    page.locator("#proposals-pending .proposal-approve").first.tap()
    expect(page.locator("#ai-reauth")).to_be_visible()
    _check(page, "reauth-dialog", problems)
    page.locator("#ai-reauth-cancel").tap()

    # The fleet pages' three-step dialog (confirm.js).
    page.goto(f"{base}/servers/{ids['server']}/")
    page.locator("button[data-hr-action='servers.isolate']").tap()
    dialog = page.locator("dialog.hr-dialog")
    dialog.locator("input").fill("checking")
    _check(page, "fleet-dialog-reason", problems)
    dialog.locator("button[type=submit]").tap()
    expect(dialog.locator("input.hr-retype")).to_be_visible()
    _check(page, "fleet-dialog-retype", problems)
