"""Dark mode (system preference and a per-operator override stored on the server) and an
axe-core accessibility check of the main pages and the panel, in both themes."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, connect_model
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

READY = "#ai-panel[data-ready=true]"
PAGES = [
    "/",
    "/servers/",
    "/jobs/",
    "/incidents/",
    "/proposals/",
    "/audit/",
    "/ai/archive/",
    "/ops/ai",
    "/settings/",
]

LUMINANCE = """el => {
  const [r, g, b] = getComputedStyle(el).backgroundColor.match(/\\d+/g).map(Number).map(v => {
    v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}"""


def background(page, selector: str) -> float:
    return page.locator(selector).first.evaluate(LUMINANCE)


def test_dark_mode_follows_the_system_and_the_operator_choice(live_asgi, page_factory, operator):
    base = live_asgi.url
    page = page_factory()
    page.emulate_media(color_scheme="dark")
    login(page, base, operator)
    page.wait_for_selector(READY, state="attached")
    assert page.locator("html").get_attribute("data-theme") == "auto"
    assert background(page, "body") < 0.05 and background(page, "#ai-panel") < 0.05
    screenshot(page, "theme-dark-system")

    # The operator picks Light: applied at once, stored on the server, kept after a reload
    # and in another browser, although the system still prefers dark.
    page.select_option("#theme-select", "light")
    assert background(page, "body") > 0.8
    page.wait_for_function(
        "() => fetch('/api/ai/panel').then(r => r.json()).then(d => d.panel.theme === 'light')"
    )
    page.reload()
    page.wait_for_selector(READY, state="attached")
    assert page.locator("html").get_attribute("data-theme") == "light"
    assert background(page, "body") > 0.8
    other = page_factory()
    other.emulate_media(color_scheme="dark")
    login(other, base, operator)
    assert other.locator("html").get_attribute("data-theme") == "light"

    # ... and Dark on a light system.
    page.emulate_media(color_scheme="light")
    page.select_option("#theme-select", "dark")
    assert background(page, "body") < 0.05
    screenshot(page, "theme-dark-override")


def axe_violations(page, base: str) -> list[dict]:
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(url=base + "/static/vendor/axe.min.js")
    result = page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => "
        "({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))"
    )
    return [v for v in result if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_axe_finds_no_serious_violations(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key, theme
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    call(page, base, "PUT", "/api/ai/panel", {"theme": theme})
    fake_anthropic.replies.push(
        Reply(text="## Report\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```bash\nuptime\n```\n")
    )
    problems = {}
    for path in PAGES:
        page.goto(base + path)
        page.wait_for_selector(READY, state="attached")
        if path == "/":
            page.fill("#ai-input", "Report, please")
            page.press("#ai-input", "Enter")
            expect(page.locator("#ai-log .ai-msg.from-model[data-status=complete]")).to_have_count(
                1
            )
        found = axe_violations(page, base)
        if found:
            problems[path] = found
    screenshot(page, f"axe-settings-{theme}")
    assert not problems, json.dumps(problems, indent=1)
