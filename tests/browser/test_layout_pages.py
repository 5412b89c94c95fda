"""Every console page at every width (issue 24 item 3): 390, 1000, 1280 and 1440 px, the
panel open at its minimum and maximum width and closed, light and dark. Nothing scrolls
the page sideways; no button, link or field of `main` lies under the panel or outside the
viewport; the panel never covers the menu. axe-core finds no serious or critical issue on
any page, in both themes and both languages (English at 1280/1440, Korean at 390/1000).

One browser; each page is loaded once per language, then the width (viewport resize),
the panel (Home/End on its resize handle, ×) and the theme change in place; the data is
seeded once per group of pages."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, login
from tests.browser.helpers import call, connect_model, csrf, reauth
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

READY = "#ai-panel[data-ready=true]"

# Every console page (hal/urls*.py, chatrooms/urls.py, providers/, webfetch/, runbooks/);
# `{name}` is filled in from the seeded data.
PAGES = [
    ("overview", "/"),
    ("servers", "/servers/"),
    ("server", "/servers/{server}/"),
    ("modules", "/modules/"),
    ("module", "/modules/portal/"),
    ("releases", "/releases/"),
    ("jobs", "/jobs/"),
    ("job", "/jobs/{job}/"),
    ("incidents", "/incidents/"),
    ("incident", "/incidents/{incident}/"),
    ("runbooks", "/runbooks/"),
    ("runbook", "/runbooks/{runbook}/"),
    ("approvals", "/proposals/"),
    ("notifications", "/notifications/"),
    ("audit", "/audit/"),
    ("settings", "/settings/"),
    ("dr", "/dr/"),
    ("metrics", "/metrics/"),
    ("changes", "/changes/"),
    ("mail", "/mail/"),
    ("emergency", "/emergency/"),
    ("ops-ai", "/ops/ai"),
    ("web", "/ops/web"),
    ("archive", "/ai/archive/"),
    ("archived", "/ai/archive/{archive}"),
    ("search", "/ai/archive/?q=disk"),
    ("transcript", "/ai/rooms/{room}/transcript"),
]

REPLY = (
    "## Disk report\n\nThe disk of **web-01** is full.\n\n"
    "| server | disk | inode use | mount point | filesystem |\n|---|---|---|---|---|\n"
    "| web-01.example.internal | 98 % | 71 % | /var/lib/very/long/mount/point | ext4 |\n\n"
    "```bash\n"
    + "du -xh --max-depth=1 /var/lib/very/long/path/to/somewhere | sort -h " * 3
    + "\n```\n"
)

# Interactive elements of `main` whose visible part (after the clipping of their own
# scroll containers) lies under the panel or beyond the viewport's width; horizontal
# page scroll; the panel over the menu or the top bar.
CHECK = """() => {
  const vw = document.documentElement.clientWidth;
  const problems = [];
  if (document.documentElement.scrollWidth > vw + 1)
    problems.push(`page scrolls sideways: ${document.documentElement.scrollWidth} > ${vw}`);
  const panel = document.getElementById('ai-panel');
  const pr = panel && panel.checkVisibility() ? panel.getBoundingClientRect() : null;
  const hit = (a, b) => a.left < b.right - 1 && b.left < a.right - 1
    && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  if (pr) {
    for (const id of ['menu', 'topbar']) {
      const el = document.getElementById(id);
      if (el && el.checkVisibility() && hit(pr, el.getBoundingClientRect()))
        problems.push(`panel covers #${id}`);
    }
  }
  const sel = 'button, a[href], input:not([type=hidden]), select, textarea, summary';
  for (const el of document.querySelectorAll('#main :is(' + sel + ')')) {
    if (!el.checkVisibility({visibilityProperty: true})) continue;
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    let box = {left: r.left, right: r.right, top: r.top, bottom: r.bottom};
    for (let a = el.parentElement; a && a.id !== 'main'; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
      const c = a.getBoundingClientRect();
      box = {left: Math.max(box.left, c.left), right: Math.min(box.right, c.right),
             top: Math.max(box.top, c.top), bottom: Math.min(box.bottom, c.bottom)};
    }
    if (box.right - box.left < 1 || box.bottom - box.top < 1) continue;  // scrolled out of view
    const name = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
      ` "${(el.textContent || el.name || '').trim().slice(0, 30)}"`;
    if (box.left < -1 || box.right > vw + 1)
      problems.push(`${name} outside the viewport (${Math.round(box.left)}..`
        + `${Math.round(box.right)})`);
    if (pr && hit(box, pr)) problems.push(`${name} under the panel`);
  }
  return problems;
}"""


def axe_violations(page, base: str, rules: list[str] | None = None) -> list[dict]:
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(url=base + "/static/vendor/axe.min.js")
    result = page.evaluate(
        "rules => axe.run(document, {resultTypes: ['violations'],"
        " ...(rules ? {runOnly: {type: 'rule', values: rules}} : {})}).then(r => r.violations.map("
        "v => ({id: v.id, impact: v.impact,"
        " nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))",
        rules,
    )
    return [v for v in result if v["impact"] in ("serious", "critical")]


def seed(page, base: str, operator, fake, key) -> dict:
    """A small fleet, a runbook, two proposals, an archived and a live conversation whose
    replies carry a wide table and a long code block."""
    from django.utils import timezone

    from hal.actions.base import Actor
    from hal.models import Incident, Job, Module, Server, ServerMetric
    from hal.tools import run_tool_call

    conn = connect_model(page, base, operator, "alpha", fake, key)
    reauth(page, base, operator)
    now = timezone.now()
    web = Server.objects.create(
        hostname="web-01.example.internal",
        status=Server.ACTIVE,
        last_heartbeat_at=now,
        approved_at=now,
    )
    Server.objects.create(hostname="new-01.example.internal")
    portal, _ = Module.objects.get_or_create(name="portal")
    job = Job.objects.create(kind=Job.HEALTH_CHECK, server=web, module=portal)
    ServerMetric.objects.create(
        server=web, cpu_percent=12.5, memory_percent=40.0, disk_percent=55.0
    )
    incident = Incident.objects.create(title="Portal slow on web-01", severity="sev3")
    runbook = call(
        page,
        base,
        "POST",
        "/api/runbooks",
        {"title": "Disk full on a web server", "body": REPLY, "tags": ["disk"]},
    )["runbook"]["id"]
    rooms = call(page, base, "GET", "/api/ai/rooms")["rooms"]
    room = next(r for r in rooms if r["kind"] == "unified")["id"]
    actor = Actor(user=operator, via="ai", label=operator.username, session_key="chat")
    origin = {"connection_id": conn["id"], "room_id": room}
    run_tool_call(
        "open_incident",
        {"severity": "sev3", "title": "Disk full web-01"},
        actor=actor,
        origin=origin,
    )
    run_tool_call(
        "isolate_server",
        {"server": web.hostname, "reason": "suspicious traffic"},
        actor=actor,
        origin=origin,
    )
    from chatrooms.models import Message

    for n, text in enumerate(("why is the disk full?", "and now?"), start=1):
        fake.replies.push(Reply(text=REPLY))
        call(page, base, "POST", f"/api/ai/rooms/{room}/messages", {"text": text})
        _wait(lambda n=n: Message.objects.filter(status="complete", text=REPLY).count() >= n)
        if text.startswith("why"):
            call(page, base, "POST", f"/api/ai/rooms/{room}/reset")
    from chatrooms.models import Archive

    archive = Archive.objects.latest("pk").pk
    return {
        "server": web.pk,
        "job": job.pk,
        "incident": incident.pk,
        "runbook": runbook,
        "archive": archive,
        "room": room,
    }


def _wait(check, timeout: float = 15.0) -> None:
    from tests.browser.helpers import wait_until

    wait_until(check, timeout=timeout)


def _states(width: int) -> list[str]:
    # At 1100 px or less the panel is below the content: its width does not apply.
    return ["open-max", "open-min", "closed"] if width > 1100 else ["below"]


def _set_state(page, state: str) -> None:
    if state == "below":
        return
    panel = page.locator("#ai-panel")
    if state == "closed":
        page.locator("#ai-panel-close").click()
        expect(panel).to_be_hidden()
        return
    if not panel.is_visible():
        page.locator("#ai-panel-toggle").click()
    page.locator("#ai-panel-resizer").press("End" if state == "open-max" else "Home")


def _settle(page) -> None:
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


# English at the wide widths, Korean at the narrow ones (longer words where space is short);
# axe runs at one width per language, in both themes.
LANGUAGES = {"en": ([1280, 1440], 1440), "ko": ([390, 1000], 1000)}
GROUPS = [PAGES[i : i + 9] for i in range(0, len(PAGES), 9)]


@pytest.mark.parametrize("group", range(len(GROUPS)))
@pytest.mark.parametrize("language", ["en", "ko"])
def test_every_page_fits_every_width(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key, language, group
):
    """Each page is loaded once; the width, the panel and the theme change in place."""
    base = live_asgi.url
    widths, axe_width = LANGUAGES[language]
    page = page_factory(viewport=(widths[0], 900))
    login(page, base, operator)
    ids = seed(page, base, operator, fake_anthropic, provider_api_key)
    call(page, base, "PUT", "/api/ai/panel", {"theme": "light", "open": True})
    if language == "ko":
        page.request.post(
            base + "/language/",
            form={"language": "ko", "next": "/"},
            headers={"X-CSRFToken": csrf(page)},
        )
    out = ARTIFACTS / "layout"
    out.mkdir(parents=True, exist_ok=True)
    problems: dict[str, list] = {}
    for name, path in GROUPS[group]:
        page.goto(base + path.format(**ids), wait_until="domcontentloaded")
        page.wait_for_selector(READY, state="attached")
        for width in widths:
            page.set_viewport_size({"width": width, "height": 844 if width <= 480 else 900})
            for state in _states(width):
                _set_state(page, state)
                for theme in ("light", "dark"):
                    page.evaluate("t => { document.documentElement.dataset.theme = t; }", theme)
                    _settle(page)
                    where = f"{width}/{theme}/{language}/{name}/{state}"
                    found = page.evaluate(CHECK)
                    if found:
                        problems[where] = found
                    # Every state is checked; screenshots of the narrowest page area (panel
                    # at its widest, or below) in both themes, the others in light.
                    if theme == "light" or state in ("open-max", "below"):
                        shot = out / f"{width}-{theme}-{language}-{name}-{state}.png"
                        page.screenshot(path=str(shot))
                    if width == axe_width and state in ("open-max", "below"):
                        # The theme changes colours only (the same DOM, switched in place):
                        # every rule in light, the colour rule again in dark.
                        rules = None if theme == "light" else ["color-contrast"]
                        found = axe_violations(page, base, rules)
                        if found:
                            problems[where + "/axe"] = found
    assert not problems, json.dumps(problems, indent=1, ensure_ascii=False)
