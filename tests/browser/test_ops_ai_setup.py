"""/ops/ai setup without red herrings: adding with a key verifies at once and picks the
default model; a connection never verified is neutral; Role/Traits/Extra instructions
explain themselves."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.bounds import WAIT_MS
from tests.browser.conftest import login, screenshot
from tests.browser.helpers import reauth, watch_console

pytestmark = pytest.mark.django_db(transaction=True)


def test_add_with_key_is_verified_in_one_step(
    live_asgi, page_factory, operator, fake_openai, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    problems = watch_console(page)
    login(page, base, operator)
    reauth(page, base, operator)
    page.goto(base + "/ops/ai")
    form = page.locator("form[data-op=create]")
    # Each of the three free-text fields says what it is for, with an example.
    for field in ("role", "traits", "instructions"):
        control = form.locator(f"[name={field}]")
        help_id = control.get_attribute("aria-describedby")
        expect(page.locator(f"#{help_id}")).to_be_visible()
        assert control.get_attribute("placeholder").startswith("e.g. ")
    form.locator("input[name=name]").fill("gpt")
    form.locator("select[name=provider]").select_option("openai_compat")
    form.locator("select[name=auth_method]").select_option("api_key")
    form.locator("input[name=base_url]").fill(fake_openai.base_url)
    form.locator("input[name=api_key]").fill(provider_api_key)
    with page.expect_navigation(timeout=WAIT_MS):
        form.locator("button[type=submit]").click()
    row = page.locator("#connections tbody tr[data-id]")
    expect(row.locator("[data-field=status]")).to_have_attribute("data-status", "active")
    expect(page.locator("#ops-ai-flash")).to_contain_text("3 models verified")
    expect(row.locator("form[data-op=model] select")).to_have_value(fake_openai.models[0])
    assert row.locator(".danger[data-field=last_error]").count() == 0
    assert len(fake_openai.requests_to("/v1/models")) == 1
    screenshot(page, "ops-ai-added-and-verified")
    assert not problems or all("Failed to load resource" in p for p in problems), problems


def test_never_verified_connection_is_neutral(live_asgi, page_factory, operator):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    reauth(page, base, operator)
    page.goto(base + "/ops/ai")
    form = page.locator("form[data-op=create]")
    form.locator("input[name=name]").fill("cli")
    form.locator("select[name=provider]").select_option("local_cli")
    with page.expect_navigation(timeout=WAIT_MS):
        form.locator("button[type=submit]").click()
    row = page.locator("#connections tbody tr[data-id]")
    status = row.locator("[data-field=status]")
    expect(status).to_have_attribute("data-status", "unverified")
    expect(status).to_have_text("not verified yet")
    # Neutral: not the red error badge, no red lines; Verify is the highlighted action.
    assert "error" not in (status.get_attribute("class") or "")
    assert row.locator("td").nth(2).locator(".danger, .error").count() == 0
    expect(row.locator("form[data-op=verify] button.primary")).to_be_visible()
    screenshot(page, "ops-ai-not-verified-yet")
