"""Issue 13 in a real browser: /ops/ai states and the add form, live counters over /ws/ops/,
and the Korean login page."""

from __future__ import annotations

import re
import secrets

import pytest
from playwright.sync_api import expect

from tests.bounds import WAIT_MS
from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, connect_model, reauth, watch_console
from tests.fakes.script import Reply, ScriptedToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def test_add_form_shows_what_the_provider_needs(live_asgi, page_factory, operator):
    base = live_asgi.url
    page = page_factory()
    problems = watch_console(page)
    login(page, base, operator)
    page.goto(base + "/ops/ai")
    form = page.locator("form[data-op=create]")
    oauth = page.locator("#add-oauth")
    # Anthropic + API key: the Anthropic URL as placeholder, no OAuth fields.
    form.locator("select[name=provider]").select_option("anthropic")
    expect(form.locator("input[name=base_url]")).to_have_attribute(
        "placeholder", "https://api.anthropic.com"
    )
    expect(oauth).to_be_hidden()
    expect(page.locator("#add-api-key")).to_be_visible()
    # OAuth chosen: its fields, and no API key field.
    form.locator("select[name=auth_method]").select_option("oauth")
    expect(oauth).to_be_visible()
    expect(page.locator("#add-api-key")).to_be_hidden()
    # OpenAI-compatible: its own default URL.
    form.locator("select[name=provider]").select_option("openai_compat")
    expect(form.locator("input[name=base_url]")).to_have_attribute(
        "placeholder", "https://api.openai.com/v1"
    )
    # The CLI: login only, no base URL, no key, no OAuth.
    form.locator("select[name=provider]").select_option("local_cli")
    expect(form.locator("select[name=auth_method]")).to_have_value("login")
    expect(page.locator("#add-base-url")).to_be_hidden()
    expect(page.locator("#add-api-key")).to_be_hidden()
    expect(oauth).to_be_hidden()
    assert not problems or all("Failed to load resource" in p for p in problems), problems


def test_an_error_connection_shows_verify_and_verify_chooses_the_model(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    reauth(page, base, operator)
    conn = call(
        page,
        base,
        "POST",
        "/api/ai/connections",
        {"name": "claude", "provider": "anthropic", "base_url": fake_anthropic.base_url},
    )
    call(
        page, base, "PUT", f"/api/ai/connections/{conn['id']}/secret", {"api_key": provider_api_key}
    )
    fake_anthropic.fail_next(500)  # a short outage during the first verify
    call(page, base, "POST", f"/api/ai/connections/{conn['id']}/verify", ok=None)
    page.goto(base + "/ops/ai")
    row = page.locator(f"#connection-{conn['id']}")
    expect(row.locator("[data-field=status]")).to_have_text("error")
    # The one action that brings it back is Verify (not Enable), and the row says so.
    expect(row.locator("[data-next-action]")).to_have_text("Verify")
    expect(row.locator("form[data-op=enable]")).to_have_count(0)
    expect(row.locator("[data-field=next_action]")).to_contain_text("Verify")
    screenshot(page, "ops-ai-error-next-action")
    with page.expect_navigation():
        row.locator("form[data-op=verify] button").click()
    expect(row.locator("[data-field=status]")).to_have_text("active")
    expect(page.locator("#ops-ai-flash")).to_contain_text(
        f"default model {fake_anthropic.models[0]} (first of the list)"
    )
    expect(row.locator("form[data-op=model] select")).to_have_value(fake_anthropic.models[0])
    screenshot(page, "ops-ai")


def test_pending_approvals_count_live_on_menu_ai_button_and_overview(
    live_asgi, page_factory, operator, fake_anthropic
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    key = "sk-test-" + secrets.token_urlsafe(24)
    fake_anthropic.accepted_credentials = {key}
    conn = connect_model(page, base, operator, "alpha", fake_anthropic, key)
    page.goto(base + "/")
    badges = page.locator('span.count[data-count="pending_approvals"]')
    expect(badges).to_have_count(2)
    expect(badges.first).to_be_hidden()
    expect(page.locator('#card-approvals [data-count="pending_approvals"]')).to_have_text("0")
    expect(page.locator('#card-incidents [data-count="open_incidents"]')).to_have_text("0")
    # A model proposes a write: the counts move without a reload.
    fake_anthropic.replies.push(
        Reply(
            text="I propose an incident.",
            tool_calls=[ScriptedToolCall("open_incident", {"severity": "sev3", "title": "disk"})],
        )
    )
    rooms = call(page, base, "GET", "/api/ai/rooms")["rooms"]
    room = next(r for r in rooms if r["connection_id"] == conn["id"])
    call(page, base, "POST", f"/api/ai/rooms/{room['id']}/messages", {"text": "disk is full"})
    expect(page.locator('#card-approvals [data-count="pending_approvals"]')).to_have_text(
        "1", timeout=WAIT_MS
    )
    expect(page.locator("#menu").locator('[data-count="pending_approvals"]')).to_have_text("1")
    expect(page.locator("#ai-panel-toggle [data-count]")).to_have_text("1")
    expect(page.locator("#ai-panel-toggle [data-count]")).to_be_visible()
    # An incident opened elsewhere: the overview card follows.
    call(page, base, "POST", "/api/incidents", {"severity": "sev4", "title": "noise"})
    expect(page.locator('#card-incidents [data-count="open_incidents"]')).to_have_text("1")
    screenshot(page, "overview-live-counters")


def test_korean_login_page_switch_and_logout(live_asgi, page_factory, operator):
    base = live_asgi.url
    page = page_factory(locale="ko-KR")
    page.goto(base + "/login/")
    expect(page.locator("html")).to_have_attribute("lang", "ko")
    expect(page.locator("#login-form button[type=submit]")).to_have_text("로그인")
    screenshot(page, "login-ko")
    # The switch: English, kept for this browser.
    with page.expect_navigation():
        page.locator("#login-language button[value=en]").click()
    expect(page.locator("html")).to_have_attribute("lang", "en")
    with page.expect_navigation():
        page.locator("#login-language button[value=ko]").click()
    expect(page.locator("html")).to_have_attribute("lang", "ko")
    page.fill("input[name=username]", operator.username)
    page.fill("input[name=password]", operator.raw_password)
    page.locator("#login-form button[type=submit]").click()
    page.wait_for_url(lambda url: "/login/" not in url)
    expect(page.locator("html")).to_have_attribute("lang", "ko")
    with page.expect_navigation():
        page.locator("form[action='/logout/'] button").click()
    page.goto(base + "/login/")
    expect(page.locator("html")).to_have_attribute("lang", "ko")
    expect(page.locator("#login-form button[type=submit]")).to_have_text(re.compile("로그인"))
